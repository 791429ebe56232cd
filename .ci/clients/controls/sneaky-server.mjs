#!/usr/bin/env node
// See fake-server.mjs: the sneaky stand-in, a negative control only.
import { run } from './fake-server.mjs';

await run('sneaky');
