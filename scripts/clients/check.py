"""check.py: redis-py through seckill-proxy, with default settings (RESP3 in redis-py 8).

    python3 check.py <host:port> <sku for the plain client> <sku for the cluster client> \
        [<sku> <sku>: the same over TLS]

With CHECK_TLS_ADDR (the proxy's tls_listen, host:port) and CHECK_TLS_CA (the CA file that
signed its certificate) set, both clients run once more over TLS (ssl=True, the CA verified),
with the last two SKUs: RedisCluster then follows the facade's map, which gives a client that
came in over TLS the TLS port. Each SKU is a warmed sale of one unit. For redis.Redis and then redis.RedisCluster (through
the proxy's cluster facade): SET/GET, a pipeline, MULTI on one slot, pub/sub, and the sale
(success, -DUPLICATE, -SOLDOUT surfaced as errors with their text). Exits non-zero on the
first failure, saying what failed.
"""
import os
import sys
import time
import uuid

import redis
from redis.cluster import RedisCluster


def check(client, sku, name, subscriber):
    tag = "{py" + uuid.uuid4().hex + "}"
    assert client.set(tag + "a", "1") is True, "SET"
    assert client.get(tag + "a") == b"1", "GET"
    pipe = client.pipeline(transaction=False)
    for i in range(50):
        pipe.set(f"py:{uuid.uuid4().hex}:{i}", i)
    assert all(pipe.execute()), "pipeline"
    tx = client.pipeline(transaction=True)
    tx.incr(tag + "n")
    tx.incr(tag + "n")
    assert tx.execute() == [1, 2], "MULTI on one slot"
    channel = "py:" + uuid.uuid4().hex
    p = subscriber.pubsub()
    p.subscribe(channel)
    deadline = time.time() + 5
    got = None
    while time.time() < deadline and got is None:
        client.publish(channel, "hi")
        msg = p.get_message(timeout=0.2)
        while msg is not None and msg["type"] != "message":
            msg = p.get_message(timeout=0.2)
        if msg is not None:
            got = msg["data"]
    p.close()
    assert got == b"hi", f"pub/sub: {got!r}"
    order = client.execute_command("SECKILL.BUY", sku, "u1")
    assert order, "BUY"
    for uid, code in (("u1", "DUPLICATE"), ("u2", "SOLDOUT")):
        try:
            client.execute_command("SECKILL.BUY", sku, uid)
        except redis.ResponseError as e:
            assert str(e).startswith(code), f"BUY {uid}: {e}"
        else:
            raise AssertionError(f"BUY {uid}: no {code} error")
    info = client.execute_command("CLIENT", "INFO")
    resp = "resp=3" if b"resp=3" in (info if isinstance(info, bytes) else str(info).encode()) else "resp=2"
    print(f"redis-py {redis.__version__} {name}: SET/GET, pipeline, MULTI, pub/sub, BUY, DUPLICATE, SOLDOUT ok ({resp})")


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    plain = redis.Redis(host=host, port=int(port))
    check(plain, sys.argv[2], "Redis", plain)
    cluster = RedisCluster(host=host, port=int(port))
    check(cluster, sys.argv[3], "RedisCluster", cluster)
    tls_addr, ca = os.environ.get("CHECK_TLS_ADDR"), os.environ.get("CHECK_TLS_CA")
    if tls_addr and ca:
        host, port = tls_addr.rsplit(":", 1)
        tls = redis.Redis(host=host, port=int(port), ssl=True, ssl_ca_certs=ca)
        check(tls, sys.argv[4], "Redis over TLS", tls)
        tls_cluster = RedisCluster(host=host, port=int(port), ssl=True, ssl_ca_certs=ca)
        check(tls_cluster, sys.argv[5], "RedisCluster over TLS", tls_cluster)


if __name__ == "__main__":
    main()
