// Types of chat-fakes.mjs for the TypeScript tests.
export declare const CHAT_MODEL: string;
export declare const KNOWN_INDICATOR: string;
export declare const KNOWN_EVENT: string;
export declare const UNKNOWN_INDICATOR: string;
export declare function modelAnswer(matched: string | null): string;
export declare function startChatFakes(): Promise<{ env: Record<string, string>; stop: () => Promise<unknown> }>;
