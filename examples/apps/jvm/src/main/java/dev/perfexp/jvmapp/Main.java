package dev.perfexp.jvmapp;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.exporter.httpserver.MetricsHandler;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The JVM sample target: an HTTP service whose work per request (CPU on the
 * thread's clock, allocation) is configurable, with a run-time "memory tracking"
 * switch that retains data per request, as the monitoring switch in the seed
 * story did: under load the heap climbs, GC thrashes and latency spirals.
 *
 * <p>Port 8080 serves GET /work and /healthz; the admin port 8081 serves
 * /metrics (Prometheus, with the standard JVM metrics: jvm_memory_used_bytes,
 * jvm_memory_pool_collection_used_bytes, jvm_gc_collection_seconds) and
 * /admin/memory-tracking (GET: "on" or "off"; POST with body on or off).
 *
 * <p>Flags (or the environment variable in brackets): --port [PORT] 8080,
 * --admin-port [ADMIN_PORT] 8081, --work-cpu-ms [WORK_CPU_MS] 4,
 * --work-alloc-kib [WORK_ALLOC_KIB] 16, --tracking-kib [TRACKING_KIB] 64,
 * --memory-tracking [MEMORY_TRACKING] off, --threads [THREADS] 16.
 */
public final class Main {
  private final Config cfg;
  private final ThreadMXBean threads = ManagementFactory.getThreadMXBean();
  private final AtomicBoolean tracking = new AtomicBoolean();
  private final ConcurrentLinkedQueue<byte[]> retained = new ConcurrentLinkedQueue<>();
  private final AtomicLong retainedBytes = new AtomicLong();
  private final Histogram durations;
  private final Counter requests;
  private final Counter cpuSpent;
  private final Gauge switches;
  private final Gauge retainedGauge;
  private volatile long sink; // keeps the work from being optimised away

  Main(Config cfg, PrometheusRegistry registry) {
    this.cfg = cfg;
    durations =
        Histogram.builder()
            .name("jvmapp_request_duration_seconds")
            .help("Wall time of work requests.")
            .classicExponentialUpperBounds(0.0005, 2, 14)
            .register(registry);
    requests = Counter.builder().name("jvmapp_requests_total").help("Work requests served.").register(registry);
    cpuSpent =
        Counter.builder()
            .name("jvmapp_work_cpu_seconds_total")
            .help("CPU time burnt by work requests (thread CPU clock).")
            .register(registry);
    switches =
        Gauge.builder()
            .name("jvmapp_switch_enabled")
            .help("1 while the switch is on.")
            .labelNames("switch")
            .register(registry);
    retainedGauge =
        Gauge.builder()
            .name("jvmapp_retained_bytes")
            .help("Bytes memory tracking holds.")
            .register(registry);
    setTracking(cfg.memoryTracking, "config");
  }

  public static void main(String[] args) throws IOException {
    Config cfg;
    try {
      cfg = Config.parse(args, System.getenv());
    } catch (IllegalArgumentException e) {
      System.err.println("jvmapp: " + e.getMessage());
      System.exit(2);
      return;
    }
    PrometheusRegistry registry = PrometheusRegistry.defaultRegistry;
    JvmMetrics.builder().register(registry);
    Main app = new Main(cfg, registry);

    ExecutorService pool = Executors.newFixedThreadPool(cfg.threads);
    HttpServer main = HttpServer.create(new InetSocketAddress(cfg.port), 128);
    main.createContext("/work", app::work);
    main.createContext("/healthz", ex -> reply(ex, 200, "ok\n"));
    main.setExecutor(pool);

    HttpServer admin = HttpServer.create(new InetSocketAddress(cfg.adminPort), 16);
    admin.createContext("/metrics", new MetricsHandler(registry));
    admin.createContext("/admin/memory-tracking", app::memoryTracking);
    admin.setExecutor(Executors.newFixedThreadPool(2));

    main.start();
    admin.start();
    log("listening", Map.of("port", cfg.port, "adminPort", cfg.adminPort, "config", cfg));
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  log("shutting down", Map.of());
                  main.stop(5);
                  admin.stop(0);
                }));
  }

  /** GET /work: the configured CPU and allocation, and the tracked retention. */
  void work(HttpExchange ex) throws IOException {
    long start = System.nanoTime();
    long cpu0 = threads.getCurrentThreadCpuTime();
    long until = cpu0 + cfg.workCpuMs * 1_000_000L;
    long acc = 0;
    while (threads.getCurrentThreadCpuTime() < until) {
      for (int i = 0; i < 2000; i++) {
        acc += (acc * 31) ^ i;
      }
    }
    byte[] garbage = new byte[cfg.workAllocKib * 1024];
    for (int i = 0; i < garbage.length; i += 4096) {
      garbage[i] = (byte) acc;
    }
    if (tracking.get()) {
      byte[] kept = new byte[cfg.trackingKib * 1024];
      for (int i = 0; i < kept.length; i += 4096) {
        kept[i] = 1; // touched, so it is resident
      }
      retained.add(kept);
      retainedGauge.set(retainedBytes.addAndGet(kept.length));
    }
    sink = acc + garbage[0];
    cpuSpent.inc((threads.getCurrentThreadCpuTime() - cpu0) / 1e9);
    reply(ex, 200, "ok\n");
    requests.inc();
    durations.observe((System.nanoTime() - start) / 1e9);
  }

  /** GET or POST /admin/memory-tracking. */
  void memoryTracking(HttpExchange ex) throws IOException {
    switch (ex.getRequestMethod()) {
      case "GET" -> reply(ex, 200, (tracking.get() ? "on" : "off") + "\n");
      case "POST", "PUT" -> {
        String body;
        try (InputStream in = ex.getRequestBody()) {
          body = new String(in.readNBytes(16), StandardCharsets.UTF_8).trim();
        }
        switch (body) {
          case "on" -> setTracking(true, "admin");
          case "off" -> setTracking(false, "admin");
          default -> {
            reply(ex, 400, "body must be on or off, not \"" + body + "\"\n");
            return;
          }
        }
        reply(ex, 200, body + "\n");
      }
      default -> reply(ex, 405, "GET, or POST on|off\n");
    }
  }

  /** Switching off releases what tracking held; the next GC reclaims it. */
  void setTracking(boolean on, String by) {
    tracking.set(on);
    if (!on) {
      retained.clear();
      retainedBytes.set(0);
      retainedGauge.set(0);
    }
    switches.labelValues("memory-tracking").set(on ? 1 : 0);
    log("switch", Map.of("switch", "memory-tracking", "on", on, "by", by));
  }

  static void reply(HttpExchange ex, int code, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
    ex.sendResponseHeaders(code, b.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(b);
    }
  }

  static void log(String msg, Map<String, Object> fields) {
    StringBuilder sb = new StringBuilder("msg=").append(msg);
    new TreeMap<>(fields).forEach((k, v) -> sb.append(' ').append(k).append('=').append(v));
    System.err.println(sb);
  }

  /** Config is the app's settings, from flags with environment fallbacks. */
  record Config(
      int port,
      int adminPort,
      int workCpuMs,
      int workAllocKib,
      int trackingKib,
      boolean memoryTracking,
      int threads) {

    static Config parse(String[] args, Map<String, String> env) {
      Map<String, String> v = new TreeMap<>();
      for (String a : args) {
        if (!a.startsWith("--") || !a.contains("=")) {
          throw new IllegalArgumentException("argument " + a + ": want --name=value");
        }
        int eq = a.indexOf('=');
        v.put(a.substring(2, eq), a.substring(eq + 1));
      }
      Config c =
          new Config(
              intOf(v, env, "port", 8080, 1, 65535),
              intOf(v, env, "admin-port", 8081, 1, 65535),
              intOf(v, env, "work-cpu-ms", 4, 0, 10_000),
              intOf(v, env, "work-alloc-kib", 16, 0, 1 << 20),
              intOf(v, env, "tracking-kib", 64, 1, 1 << 20),
              switchOf(v, env, "memory-tracking"),
              intOf(v, env, "threads", 16, 1, 1024));
      if (!v.isEmpty()) {
        throw new IllegalArgumentException("unknown flag(s) " + v.keySet());
      }
      if (c.port == c.adminPort) {
        throw new IllegalArgumentException("--port and --admin-port are both " + c.port);
      }
      return c;
    }

    private static String take(Map<String, String> v, Map<String, String> env, String name) {
      String s = v.remove(name);
      return s != null ? s : env.get(name.toUpperCase().replace('-', '_'));
    }

    private static int intOf(Map<String, String> v, Map<String, String> env, String name, int def, int min, int max) {
      String s = take(v, env, name);
      if (s == null || s.isEmpty()) {
        return def;
      }
      try {
        int n = Integer.parseInt(s);
        if (n < min || n > max) {
          throw new IllegalArgumentException("--" + name + "=" + s + ": must be from " + min + " to " + max);
        }
        return n;
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("--" + name + "=" + s + ": not a whole number");
      }
    }

    private static boolean switchOf(Map<String, String> v, Map<String, String> env, String name) {
      String s = take(v, env, name);
      if (s == null || s.isEmpty() || s.equals("off")) {
        return false;
      }
      if (s.equals("on")) {
        return true;
      }
      throw new IllegalArgumentException("--" + name + "=" + s + ": want on or off");
    }
  }
}
