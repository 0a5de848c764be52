// Node.js as its users run it (issue 24): a worker thread computing beside
// the main thread, messages both ways, a timer, and a file written and read
// back. Run with `node -e` (the image of a run without --root is node and
// its libraries); prints the same lines natively and in Rewind.
'use strict';
const { Worker } = require('node:worker_threads');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function sum(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += i;
  return s;
}

function work() {
  const { parentPort, workerData } = require('node:worker_threads');
  let s = 0;
  for (let i = 0; i < workerData.n; i++) s += i;
  parentPort.postMessage({ sum: s });
  parentPort.on('message', () => process.exit(0));
}

const w = new Worker(`(${work})()`, { eval: true, workerData: { n: 100000 } });
w.on('message', (m) => {
  console.log(`worker: sum ${m.sum}`);
  w.postMessage('stop');
});
w.on('exit', (code) => {
  console.log(`worker exited ${code}`);
  setTimeout(() => {
    const f = path.join(os.tmpdir(), `rewind-node-${process.pid}.txt`);
    fs.writeFileSync(f, JSON.stringify({ main: sum(1000) }));
    console.log(`file: ${fs.readFileSync(f, 'utf8')}`);
    fs.unlinkSync(f);
    console.log('done');
  }, 10);
});
