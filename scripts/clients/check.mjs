// check.mjs: ioredis and node-redis through seckill-proxy, with default settings.
//
//   node check.mjs <host:port> <sku> <sku> <sku> <sku> [<sku> <sku>: over TLS]
//
// With CHECK_TLS_ADDR (the proxy's tls_listen, host:port) and CHECK_TLS_CA (the CA file that
// signed its certificate) set, node-redis createClient (rediss://) and ioredis Cluster (tls,
// following the facade's map, which gives a TLS client the TLS port) run once more over TLS,
// with the last two SKUs.
//
// Each SKU is a warmed sale of one unit, for, in turn: node-redis createClient,
// node-redis createCluster (through the proxy's cluster facade), ioredis Redis and ioredis
// Cluster. Each runs SET/GET, a pipeline, MULTI on one slot, pub/sub and the sale (success,
// -DUPLICATE, -SOLDOUT surfaced as errors with their text). Beside them all, an ioredis
// subscriber holds one channel for longer than every Redis timeout of the proxy's default
// configuration, with a message every half second, and must lose none and never reconnect.
// Exits non-zero on the first failure, saying what failed.
import { createClient, createCluster } from "redis";
import IORedis from "ioredis";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";

const [hostPort, ...skus] = process.argv.slice(2);
// node-redis reconnects for ever by default: a proxy that never answers fails the check.
setTimeout(() => {
  console.error("check.mjs: not done within 120 s");
  process.exit(1);
}, 120_000).unref();
const [host, port] = [hostPort.slice(0, hostPort.lastIndexOf(":")), Number(hostPort.slice(hostPort.lastIndexOf(":") + 1))];

function assert(ok, what) {
  if (!ok) throw new Error(what);
}

async function sale(call, sku, name) {
  const order = await call(["SECKILL.BUY", sku, "u1"]);
  assert(order, `${name} BUY`);
  for (const [uid, code] of [["u1", "DUPLICATE"], ["u2", "SOLDOUT"]]) {
    let err;
    try {
      await call(["SECKILL.BUY", sku, uid]);
    } catch (e) {
      err = e;
    }
    assert(err && String(err.message).startsWith(code), `${name} BUY ${uid}: ${err && err.message}, want ${code}`);
  }
}

async function nodeRedis(client, sub, sku, name, call) {
  const tag = `{js${randomUUID()}}`;
  assert((await client.set(tag + "a", "1")) === "OK", `${name} SET`);
  assert((await client.get(tag + "a")) === "1", `${name} GET`);
  const many = await Promise.all(Array.from({ length: 50 }, (_, i) => client.set(`js:${randomUUID()}:${i}`, String(i))));
  assert(many.every((r) => r === "OK"), `${name} pipeline`);
  const tx = await client.multi().incr(tag + "n").incr(tag + "n").exec();
  assert(JSON.stringify(tx) === "[1,2]", `${name} MULTI: ${JSON.stringify(tx)}`);
  const channel = `js:${randomUUID()}`;
  let got;
  await sub.subscribe(channel, (m) => { got = m; });
  for (let i = 0; i < 50 && got === undefined; i++) {
    await client.publish(channel, "hi");
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(got === "hi", `${name} pub/sub: ${got}`);
  await sub.unsubscribe(channel);
  await sale(call, sku, name);
}

async function ioredis(client, sku, name) {
  const tag = `{io${randomUUID()}}`;
  assert((await client.set(tag + "a", "1")) === "OK", `${name} SET`);
  assert((await client.get(tag + "a")) === "1", `${name} GET`);
  const p = client.pipeline();
  for (let i = 0; i < 50; i++) p.set(`io:${randomUUID()}:${i}`, String(i));
  const res = await p.exec();
  assert(res.every(([err, r]) => !err && r === "OK"), `${name} pipeline`);
  const tx = await client.multi().incr(tag + "n").incr(tag + "n").exec();
  assert(JSON.stringify(tx) === "[[null,1],[null,2]]", `${name} MULTI: ${JSON.stringify(tx)}`);
  const sub = client.duplicate();
  const channel = `io:${randomUUID()}`;
  let got;
  sub.on("message", (_, m) => { got = m; });
  await sub.subscribe(channel);
  for (let i = 0; i < 50 && got === undefined; i++) {
    await client.publish(channel, "hi");
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(got === "hi", `${name} pub/sub: ${got}`);
  sub.disconnect();
  await sale((args) => client.call(...args), sku, name);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// longSubscriber holds a subscription for holdMs through the proxy, beside the other checks.
async function longSubscriber(holdMs) {
  const sub = new IORedis(port, host);
  const pub = new IORedis(port, host);
  let reconnects = 0;
  sub.on("reconnecting", () => reconnects++);
  const channel = `io:long:${randomUUID()}`;
  const got = [];
  sub.on("message", (_, m) => got.push(m));
  await sub.subscribe(channel);
  let sent = 0;
  while (sent < holdMs / 500) {
    await sleep(500);
    await pub.publish(channel, String(++sent));
  }
  for (let i = 0; i < 50 && got.length < sent; i++) await sleep(100);
  assert(reconnects === 0 && got.length === sent && got.every((m, i) => m === String(i + 1)),
    `ioredis subscriber: ${got.length} of ${sent} messages, ${reconnects} reconnections`);
  console.log(`ioredis subscriber held ${holdMs / 1000} s: ${got.length} of ${sent} messages, 0 reconnections`);
  sub.disconnect();
  pub.disconnect();
}
const long = longSubscriber(12_000);

const plain = createClient({ url: `redis://${hostPort}` });
plain.on("error", (e) => console.error("node-redis:", e.message));
await plain.connect();
const plainSub = plain.duplicate();
await plainSub.connect();
await nodeRedis(plain, plainSub, skus[0], "node-redis createClient", (args) => plain.sendCommand(args));
const hello = await plain.sendCommand(["CLIENT", "INFO"]);
console.log(`node-redis createClient: ok (${String(hello).match(/resp=\d/)})`);
await plainSub.quit();
await plain.quit();

const cluster = createCluster({ rootNodes: [{ url: `redis://${hostPort}` }] });
cluster.on("error", (e) => console.error("node-redis cluster:", e.message));
await cluster.connect();
const clusterSub = cluster; // node-redis's cluster keeps its own subscriber connection
await nodeRedis(cluster, clusterSub, skus[1], "node-redis createCluster", (args) => cluster.sendCommand(args[1], false, args));
console.log("node-redis createCluster: ok");
await cluster.quit();

const io = new IORedis(port, host);
await ioredis(io, skus[2], "ioredis Redis");
console.log(`ioredis Redis: ok (${String(await io.call("CLIENT", "INFO")).match(/resp=\d/)})`);
io.disconnect();

const ioc = new IORedis.Cluster([{ host, port }]);
await ioredis(ioc, skus[3], "ioredis Cluster");
console.log("ioredis Cluster: ok");
ioc.disconnect();

const [tlsAddr, tlsCA] = [process.env.CHECK_TLS_ADDR, process.env.CHECK_TLS_CA];
if (tlsAddr && tlsCA) {
  const ca = readFileSync(tlsCA);
  const [th, tp] = [tlsAddr.slice(0, tlsAddr.lastIndexOf(":")), Number(tlsAddr.slice(tlsAddr.lastIndexOf(":") + 1))];
  const secure = createClient({ url: `rediss://${tlsAddr}`, socket: { tls: true, ca } });
  secure.on("error", (e) => console.error("node-redis over TLS:", e.message));
  await secure.connect();
  const secureSub = secure.duplicate();
  await secureSub.connect();
  await nodeRedis(secure, secureSub, skus[4], "node-redis createClient over TLS", (args) => secure.sendCommand(args));
  console.log("node-redis createClient over TLS: ok");
  await secureSub.quit();
  await secure.quit();
  const tlsc = new IORedis.Cluster([{ host: th, port: tp }], { redisOptions: { tls: { ca } } });
  await ioredis(tlsc, skus[5], "ioredis Cluster over TLS");
  console.log("ioredis Cluster over TLS: ok");
  tlsc.disconnect();
}
await long;
process.exit(0);
