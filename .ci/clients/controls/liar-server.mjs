#!/usr/bin/env node
// See fake-server.mjs: the liar stand-in, a negative control only.
import { run } from './fake-server.mjs';

await run('liar');
