import { afterAll } from 'vitest';
import { removeTempDirs } from './tools';

// Registered before the test file's own hooks, so it runs after them (nginx and Chromium stopped).
afterAll(() => removeTempDirs());
