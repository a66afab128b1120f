#!/usr/bin/env node
import { main } from '../dist/main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    console.error(`MQD_E_INTERNAL: ${e?.stack ?? e}: this is a bug in MQD Dashboard; please report it`);
    process.exitCode = 70;
  },
);
