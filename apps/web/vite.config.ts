// Vite 8 builds the dashboard with its built-in oxc transform (no React plugin is installed):
// TSX compiles with React's automatic runtime. Workspace packages resolve to their TypeScript
// sources, as in vitest.config.ts, so the dashboard never needs packages/model built first.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// `npm run dev -w @mqd/web` proxies the API to a running `mqd serve`.
const devServer = process.env['MQD_DEV_SERVER'] ?? 'http://127.0.0.1:8080';
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  root: here('.'),
  // Absolute asset paths: the shared route /s/<id> serves the same index.html.
  base: '/',
  oxc: { jsx: { runtime: 'automatic' } },
  resolve: {
    // Exact matches: the worker-light leaves ('@mqd/model/edge-table', '/edge-filter',
    // '/pyramid') are not the index's subfolders.
    alias: [
      ...['edge-table', 'edge-filter', 'pyramid'].map((leaf) => ({
        find: new RegExp(`^@mqd/model/${leaf}$`),
        replacement: here(`../../packages/model/src/edges/${leaf}.ts`),
      })),
      { find: /^@mqd\/model$/, replacement: here('../../packages/model/src/index.ts') },
    ],
  },
  worker: { format: 'es' },
  build: {
    outDir: here('dist'),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    rolldownOptions: {
      input: { main: here('index.html'), bench: here('bench.html'), stacks: here('stacks-bench.html') },
    },
  },
  server: {
    proxy: { '/api': devServer, '/socket.io': { target: devServer, ws: true } },
  },
});
