// Baseline for benches/compare.sh: the Node `ws` echo server (with its optional native
// `bufferutil`, as ws recommends for production). Usage: node echo.js [PORT];
// prints {"event":"listening","port":P}. compare.sh installs `ws` into a scratch folder.
'use strict';
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2] || 0);
const wss = new WebSocketServer({ host: '127.0.0.1', port, maxPayload: 64 * 1024 * 1024 });
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  ws.on('error', () => ws.terminate()); // a broken peer ends its socket, not the server
});
wss.on('listening', () => {
  console.log(JSON.stringify({ event: 'listening', port: wss.address().port }));
});
