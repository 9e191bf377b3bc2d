// Development stub. In the image, /config.js is written at start by docker-entrypoint.d/40-rxc-config.sh.
window.__APP_CONFIG__ = {"apiBaseUrl":"http://localhost:5009","analyticsAiChatEnabled":false};
