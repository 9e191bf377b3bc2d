import { defineConfig } from 'vitest/config';

// System tests run real programs: the entrypoint hook under busybox sh and dash, Debian's nginx
// with the production config, and Chromium against that nginx.
export default defineConfig({
  test: {
    environment: 'node',
    include: ['test/system/**/*.test.ts'],
    setupFiles: ['test/system/setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
