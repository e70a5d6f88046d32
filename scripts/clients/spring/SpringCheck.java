import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import org.springframework.cache.Cache;
import org.springframework.data.redis.cache.RedisCacheConfiguration;
import org.springframework.data.redis.cache.RedisCacheManager;
import org.springframework.data.redis.connection.RedisClusterConfiguration;
import org.springframework.data.redis.connection.RedisPassword;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.StringRedisTemplate;

/**
 * Spring Data Redis through seckill-proxy with its defaults (Lettuce), only the address (and
 * the user) set: a standalone connection factory at the proxy, then a cluster one at the
 * proxy's cluster facade. StringRedisTemplate's values, hashes and lists, and the cache that
 * backs @Cacheable and @CacheEvict: put, get, evict, and clear, which is what
 * {@code @CacheEvict(allEntries = true)} calls (KEYS, then DEL, by default). Each check prints
 * "PASS name" or "FAIL name: why"; the last line counts them.
 *
 * <p>java -cp 'lib/*' SpringCheck.java host:port [user password]
 */
public class SpringCheck {
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
      failures.add(mode + " " + name);
      System.out.println("FAIL " + mode + " " + name + ": " + String.valueOf(root.getMessage()).replace('\n', ' '));
    }
  }

  static void must(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static void checks(String mode, LettuceConnectionFactory f) {
    StringRedisTemplate t = new StringRedisTemplate(f);
    t.afterPropertiesSet();
    String p = "spring:" + UUID.randomUUID() + ":";
    check(mode, "template value", () -> {
      t.opsForValue().set(p + "v", "1");
      must("1".equals(t.opsForValue().get(p + "v")), "get after set");
      must(t.opsForValue().increment(p + "n") == 1, "increment");
    });
    check(mode, "template hash and list", () -> {
      t.opsForHash().put(p + "h", "f", "v");
      must("v".equals(t.opsForHash().get(p + "h", "f")), "hget");
      t.opsForList().rightPush(p + "l", "a");
      must("a".equals(t.opsForList().leftPop(p + "l")), "lpop");
    });
    RedisCacheManager cm = RedisCacheManager.builder(f)
        .cacheDefaults(RedisCacheConfiguration.defaultCacheConfig().entryTtl(Duration.ofMinutes(5)))
        .build();
    cm.afterPropertiesSet();
    Cache cache = cm.getCache(p + "cache");
    check(mode, "cache put, get, evict", () -> {
      cache.put("a", "1"); // in cluster mode it may land a little later, straight to the cluster too
      long until = System.nanoTime() + 5_000_000_000L;
      while (!"1".equals(cache.get("a", String.class))) {
        must(System.nanoTime() < until, "get after put: " + cache.get("a"));
        Thread.sleep(20);
      }
      cache.evict("a"); // in cluster mode this too may land a little later
      until = System.nanoTime() + 5_000_000_000L;
      while (cache.get("a") != null) {
        must(System.nanoTime() < until, "gone after evict");
        Thread.sleep(20);
      }
    });
    check(mode, "cache clear (@CacheEvict(allEntries = true))", () -> {
      for (int i = 0; i < 20; i++) {
        cache.put("c" + i, "v" + i);
      }
      cache.clear(); // may be done later: Spring's Cache.clear() allows it
      for (int i = 0; i < 20; i++) {
        long until = System.nanoTime() + 5_000_000_000L;
        while (cache.get("c" + i) != null) {
          must(System.nanoTime() < until, "c" + i + " left 5 s after clear");
          Thread.sleep(20);
        }
      }
    });
  }

  public static void main(String[] args) {
    String[] hp = args[0].split(":");
    String host = hp[0];
    int port = Integer.parseInt(hp[1]);
    String user = args.length > 1 && !args[1].isEmpty() ? args[1] : null;
    String password = args.length > 2 && !args[2].isEmpty() ? args[2] : null;
    String who = user == null ? "default" : user;

    RedisStandaloneConfiguration single = new RedisStandaloneConfiguration(host, port);
    single.setUsername(user);
    if (password != null) {
      single.setPassword(RedisPassword.of(password));
    }
    LettuceConnectionFactory sf = new LettuceConnectionFactory(single);
    sf.afterPropertiesSet();
    try {
      checks("standalone/" + who, sf);
    } finally {
      sf.destroy();
    }

    RedisClusterConfiguration cluster = new RedisClusterConfiguration(List.of(args[0]));
    cluster.setUsername(user);
    if (password != null) {
      cluster.setPassword(RedisPassword.of(password));
    }
    LettuceConnectionFactory cf = new LettuceConnectionFactory(cluster);
    cf.afterPropertiesSet();
    try {
      checks("cluster/" + who, cf);
    } finally {
      cf.destroy();
    }
    System.out.println("Spring Data Redis " + who + ": " + passed + " of " + (passed + failed) + " checks pass" + (failures.isEmpty() ? "" : "; failed: " + failures));
    System.exit(0);
  }
}
