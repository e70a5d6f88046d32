import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.AbstractTransaction;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.SafeEncoder;

/**
 * Jedis through seckill-proxy, with default settings: RedisClient, then RedisClusterClient
 * through the proxy's cluster facade. Each runs SET/GET, a pipeline, MULTI on one slot (not
 * the cluster client, which has no transactions), pub/sub and the sale (success, -DUPLICATE, -SOLDOUT surfaced as errors with their text).
 *
 * <p>java -cp 'lib/*' Check.java host:port sku sku
 */
public class Check {
  static final ProtocolCommand BUY = () -> SafeEncoder.encode("SECKILL.BUY");

  static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static void run(UnifiedJedis c, String sku, String name, boolean cluster) throws Exception {
    String tag = "{java" + UUID.randomUUID() + "}";
    check("OK".equals(c.set(tag + "a", "1")), name + " SET");
    check("1".equals(c.get(tag + "a")), name + " GET");
    AbstractPipeline p = c.pipelined();
    for (int i = 0; i < 50; i++) {
      p.set("java:" + UUID.randomUUID() + ":" + i, String.valueOf(i));
    }
    p.sync();
    p.close();
    String multi = "MULTI";
    if (cluster) {
      multi = "no MULTI (RedisClusterClient offers none)";
    } else {
      AbstractTransaction tx = c.multi();
      tx.incr(tag + "n");
      tx.incr(tag + "n");
      List<Object> res = tx.exec();
      check(res != null && res.size() == 2 && Long.valueOf(2).equals(res.get(1)), name + " MULTI: " + res);
    }
    String channel = "java:" + UUID.randomUUID();
    AtomicReference<String> got = new AtomicReference<>();
    CountDownLatch subscribed = new CountDownLatch(1);
    JedisPubSub sub =
        new JedisPubSub() {
          @Override
          public void onSubscribe(String ch, int n) {
            subscribed.countDown();
          }

          @Override
          public void onMessage(String ch, String msg) {
            got.set(msg);
            unsubscribe();
          }
        };
    Thread t = new Thread(() -> c.subscribe(sub, channel));
    t.start();
    check(subscribed.await(10, TimeUnit.SECONDS), name + " SUBSCRIBE");
    for (int i = 0; i < 50 && got.get() == null; i++) {
      c.publish(channel, "hi");
      Thread.sleep(100);
    }
    t.join(10_000);
    check("hi".equals(got.get()), name + " pub/sub: " + got.get());
    Object order = cluster ? c.sendCommand(sku, BUY, sku, "u1") : c.sendCommand(BUY, sku, "u1");
    check(order != null, name + " BUY");
    for (String[] want : new String[][] {{"u1", "DUPLICATE"}, {"u2", "SOLDOUT"}}) {
      try {
        if (cluster) {
          c.sendCommand(sku, BUY, sku, want[0]);
        } else {
          c.sendCommand(BUY, sku, want[0]);
        }
        throw new AssertionError(name + " BUY " + want[0] + ": no " + want[1] + " error");
      } catch (JedisDataException e) {
        check(e.getMessage().startsWith(want[1]), name + " BUY " + want[0] + ": " + e.getMessage());
      }
    }
    System.out.println("Jedis " + name + ": SET/GET, pipeline, " + multi + ", pub/sub, BUY, DUPLICATE, SOLDOUT ok");
  }

  public static void main(String[] args) throws Exception {
    int colon = args[0].lastIndexOf(':');
    String host = args[0].substring(0, colon);
    int port = Integer.parseInt(args[0].substring(colon + 1));
    try (RedisClient c = RedisClient.create(host, port)) {
      run(c, args[1], "RedisClient", false);
    }
    try (RedisClusterClient c = RedisClusterClient.create(new HostAndPort(host, port))) {
      run(c, args[2], "RedisClusterClient", true);
    }
  }
}
