import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.redisson.Redisson;
import org.redisson.api.BatchResult;
import org.redisson.api.RBatch;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RLock;
import org.redisson.api.RMap;
import org.redisson.api.RMapCache;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RScoredSortedSet;
import org.redisson.api.RSemaphore;
import org.redisson.api.RTopic;
import org.redisson.api.RTransaction;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.api.TransactionOptions;
import org.redisson.config.Config;

/**
 * Redisson through seckill-proxy with its default Config, only the address (and the user)
 * set: useSingleServer() at the proxy, then useClusterServers() at the proxy's cluster facade.
 * Each check prints "PASS name" or "FAIL name: why"; the last line counts them.
 *
 * <p>java -cp 'lib/*' RedissonCheck.java host:port user password
 */
public class RedissonCheck {
  interface Body {
    void run() throws Exception;
  }

  static int passed, failed;
  static final List<String> failures = new ArrayList<>();

  static void check(String mode, String name, Body b) {
    try {
      b.run();
      passed++;
      System.out.println("PASS " + mode + " " + name);
    } catch (Throwable e) {
      failed++;
      Throwable root = e;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      String why = String.valueOf(root.getMessage()).replace('\n', ' ');
      failures.add(mode + " " + name);
      System.out.println("FAIL " + mode + " " + name + ": " + why);
    }
  }

  static void must(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static void checks(String mode, RedissonClient r) {
    String p = "rsn:" + UUID.randomUUID() + ":";
    check(mode, "bucket", () -> {
      r.getBucket(p + "b").set("v");
      must("v".equals(r.getBucket(p + "b").get()), "get after set");
    });
    check(mode, "atomic long", () -> must(r.getAtomicLong(p + "n").incrementAndGet() == 1, "incrementAndGet"));
    check(mode, "map", () -> {
      RMap<String, String> m = r.getMap(p + "m");
      m.put("a", "1");
      must(m.putIfAbsent("a", "2").equals("1"), "putIfAbsent kept the old value");
      must("1".equals(m.get("a")), "get");
    });
    check(mode, "lock, reentrant", () -> {
      RLock l = r.getLock(p + "lock");
      l.lock();
      l.lock();
      must(l.getHoldCount() == 2, "held twice");
      l.unlock();
      l.unlock();
      must(!l.isLocked(), "unlocked");
    });
    check(mode, "lock, contended", () -> {
      RLock l = r.getLock(p + "contended");
      l.lock();
      AtomicBoolean other = new AtomicBoolean(true);
      Thread t = new Thread(() -> other.set(r.getLock(p + "contended").tryLock()));
      t.start();
      t.join();
      must(!other.get(), "another thread took a held lock");
      l.unlock();
    });
    check(mode, "lock, lease", () -> {
      RLock l = r.getLock(p + "lease");
      must(l.tryLock(1, 1, TimeUnit.SECONDS), "tryLock with a lease");
      must(l.remainTimeToLive() > 0, "the lease has a TTL");
      l.unlock();
    });
    check(mode, "read-write lock", () -> {
      RReadWriteLock rw = r.getReadWriteLock(p + "rw");
      rw.readLock().lock();
      rw.readLock().unlock();
      rw.writeLock().lock();
      rw.writeLock().unlock();
    });
    check(mode, "semaphore", () -> {
      RSemaphore s = r.getSemaphore(p + "sem");
      must(s.trySetPermits(2), "trySetPermits");
      s.acquire();
      must(s.availablePermits() == 1, "one left");
      s.release();
    });
    check(mode, "rate limiter", () -> {
      RRateLimiter rl = r.getRateLimiter(p + "rl");
      must(rl.trySetRate(RateType.OVERALL, 2, 1, org.redisson.api.RateIntervalUnit.SECONDS), "trySetRate");
      must(rl.tryAcquire(), "first");
      must(rl.tryAcquire(), "second");
      must(!rl.tryAcquire(), "a third within the second");
    });
    check(mode, "topic", () -> {
      RTopic t = r.getTopic(p + "topic");
      CountDownLatch got = new CountDownLatch(1);
      AtomicReference<String> msg = new AtomicReference<>();
      t.addListener(String.class, (ch, m) -> {
        msg.set(m);
        got.countDown();
      });
      t.publish("hello");
      must(got.await(5, TimeUnit.SECONDS) && "hello".equals(msg.get()), "message");
      t.removeAllListeners();
    });
    check(mode, "blocking queue", () -> {
      BlockingQueue<String> q = r.getBlockingQueue(p + "q");
      q.offer("x");
      must("x".equals(q.poll(2, TimeUnit.SECONDS)), "poll");
      must(q.poll(200, TimeUnit.MILLISECONDS) == null, "an empty poll times out");
    });
    check(mode, "scored sorted set", () -> {
      RScoredSortedSet<String> z = r.getScoredSortedSet(p + "z");
      z.add(2, "b");
      z.add(1, "a");
      must("a".equals(z.first()), "first");
    });
    check(mode, "batch", () -> {
      RBatch b = r.createBatch();
      b.getBucket(p + "b1").setAsync("1");
      b.getAtomicLong(p + "n1").incrementAndGetAsync();
      BatchResult<?> res = b.execute();
      must(res.getResponses().size() == 2, "two responses");
    });
    check(mode, "transaction", () -> {
      String tag = "{" + p + "tx}";
      RTransaction tx = r.createTransaction(TransactionOptions.defaults());
      tx.getBucket(tag + "a").set("1");
      tx.getMap(tag + "m").put("k", "v");
      tx.commit();
      must("1".equals(r.getBucket(tag + "a").get()), "committed");
    });
    check(mode, "bloom filter", () -> {
      RBloomFilter<String> bf = r.getBloomFilter(p + "bf");
      bf.tryInit(1000, 0.01);
      bf.add("a");
      must(bf.contains("a"), "contains what was added");
    });
    check(mode, "map cache with TTL", () -> {
      RMapCache<String, String> mc = r.getMapCache(p + "mc");
      mc.put("k", "v", 1, TimeUnit.SECONDS);
      must("v".equals(mc.get("k")), "get before the TTL");
      Thread.sleep(1500);
      must(mc.get("k") == null, "gone after the TTL");
    });
  }

  public static void main(String[] args) {
    String addr = "redis://" + args[0];
    String user = args.length > 1 && !args[1].isEmpty() ? args[1] : null;
    String password = args.length > 2 && !args[2].isEmpty() ? args[2] : null;
    String who = user == null ? "default" : user;

    Config single = new Config();
    single.useSingleServer().setAddress(addr).setUsername(user).setPassword(password);
    RedissonClient r = Redisson.create(single);
    try {
      checks("single/" + who, r);
    } finally {
      r.shutdown();
    }

    Config cluster = new Config();
    cluster.useClusterServers().addNodeAddress(addr).setUsername(user).setPassword(password);
    try {
      RedissonClient rc = Redisson.create(cluster);
      try {
        checks("cluster/" + who, rc);
      } finally {
        rc.shutdown();
      }
    } catch (Throwable e) {
      failed++;
      failures.add("cluster/" + who + " connect");
      System.out.println("FAIL cluster/" + who + " connect: " + e.getMessage());
    }
    System.out.println("Redisson " + who + ": " + passed + " of " + (passed + failed) + " checks pass" + (failures.isEmpty() ? "" : "; failed: " + failures));
    System.exit(0);
  }
}
