// Parses each file named on the command line with mermaid's own parser (mermaid needs a
// DOM to load: jsdom stands in for the browser). Prints "ok" or the parser's error per
// file; exits 1 if any did not parse.
import { JSDOM } from 'jsdom';
import { readFileSync } from 'fs';

const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');

let failed = 0;
for (const path of process.argv.slice(2)) {
  try {
    await mermaid.parse(readFileSync(path, 'utf8'));
    console.log(`${path}: ok`);
  } catch (error) {
    failed += 1;
    console.log(`${path}: ${error.message.split('\n').join(' ')}`);
  }
}
process.exit(failed ? 1 : 0);
