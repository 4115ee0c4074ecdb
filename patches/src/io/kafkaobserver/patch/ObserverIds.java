/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardWatchEventKinds;
import java.nio.file.WatchEvent;
import java.nio.file.WatchKey;
import java.nio.file.WatchService;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The node ids this Kafka node treats as observers, read from the observer.ids file.
 *
 * Path: $KAFKA_OBSERVER_IDS_FILE, else /opt/kafka/observer.ids. A missing file falls back to
 * $KAFKA_OBSERVER_BROKER_IDS (comma separated), then to the empty set (compatible with the public
 * observer patch set). An unreadable or corrupt file keeps the last good value and logs a WARN;
 * this class never throws to its callers.
 *
 * It sits on the follower-fetch path (Partition's ISR and HW checks) and on the controller's
 * election path, so a lookup is a volatile read plus a clock compare; once the snapshot is older
 * than the TTL ($KAFKA_OBSERVER_IDS_TTL_MS, default 1000 ms) exactly one caller (a CAS picks it)
 * re-reads the file while every other caller keeps using the previous snapshot. A daemon thread
 * (started by ObserverPatch at node start-up) makes the same call once per TTL, so a node that
 * never consults the set (a follower-only broker) still notices and audits every change. It
 * sleeps until the snapshot is one TTL old, so a file edit is picked up within one TTL (plus
 * scheduling delay), also when other callers refreshed in between.
 *
 * A second daemon thread watches the file's directory (java.nio WatchService, inotify on Linux)
 * and re-reads the file as soon as an entry named like the file, or an entry whose name starts
 * with ".." (the kubelet's atomic ConfigMap update: a new "..<timestamp>" directory, then the
 * "..data" symlink renamed over), was created, modified or deleted, once the directory has been
 * quiet for {@link #WATCH_SETTLE_MS}. A watch-triggered read is the same read as the TTL one
 * (same parser, same keep-last-on-error rules, same audit line and loaded report); the time-based
 * re-read stays as it is, so a missed or broken watch only falls back to the TTL.
 *
 * With $KAFKA_OBSERVER_IDS_LOADED_FILE set, every content this JVM adopts (first load, change,
 * fallback) is written there by {@link LoadedReport}: the observer-agent serves it, and the
 * operator counts the pod as having acknowledged a revision only once its JVM reports it.
 */
public final class ObserverIds {
    public static final String FILE_ENV = "KAFKA_OBSERVER_IDS_FILE";
    public static final String FALLBACK_ENV = "KAFKA_OBSERVER_BROKER_IDS";
    public static final String TTL_ENV = "KAFKA_OBSERVER_IDS_TTL_MS";
    public static final String LOADED_FILE_ENV = "KAFKA_OBSERVER_IDS_LOADED_FILE";
    public static final String DEFAULT_PATH = "/opt/kafka/observer.ids";
    static final long DEFAULT_TTL_MS = 1000;
    // Below this the "not on every call" promise gets thin; above it promotions get slow.
    static final long MIN_TTL_MS = 100;
    static final long MAX_TTL_MS = 60_000;
    // The observer list is a few ids; a bigger file is not one of ours.
    static final long MAX_FILE_BYTES = 1 << 20;
    private static final long WARN_EVERY_NS = TimeUnit.SECONDS.toNanos(60);
    /**
     * After a relevant event, the watcher waits until the directory has been quiet this long before
     * it reads: the kubelet's update is several entries in a row, and a writer that truncates and
     * then writes in place produces two events microseconds apart.
     */
    static final long WATCH_SETTLE_MS = 20;
    /** How often the watcher retries when the directory cannot be watched (missing, no inotify). */
    static final long WATCH_RETRY_MS = 1000;
    /** How long a watch-triggered read waits for a TTL read already running on another thread. */
    private static final long WATCH_WAIT_FOR_READER_MS = 1000;

    private static final Logger LOG = LoggerFactory.getLogger(ObserverIds.class);

    /** Lazily built on first use, so the first read happens once per JVM. */
    private static final class Holder {
        static final ObserverIds INSTANCE = fromEnvironment(System.getenv(), System::nanoTime);
    }

    public static ObserverIds get() {
        return Holder.INSTANCE;
    }

    /** The gate every patched call site uses. */
    public static boolean isObserver(int nodeId) {
        return Holder.INSTANCE.contains(nodeId);
    }

    private static final class Snapshot {
        final Set<Integer> ids;
        final String source;
        final long readAtNs;
        /** What the loaded report says about this content: the file's bytes, or a fallback. */
        final byte[] report;

        Snapshot(Set<Integer> ids, String source, long readAtNs, byte[] report) {
            this.ids = ids;
            this.source = source;
            this.readAtNs = readAtNs;
            this.report = report;
        }
    }

    private final Path path;
    private final String fallback;
    private final long ttlNs;
    private final LongSupplier nanoClock;
    /** Null when $KAFKA_OBSERVER_IDS_LOADED_FILE is not set. */
    private final LoadedReport loaded;
    private final AtomicBoolean refreshing = new AtomicBoolean();
    private final AtomicLong readFailures = new AtomicLong();
    /** Reads of the file (every attempt, failed ones included). */
    private final AtomicLong reads = new AtomicLong();
    /** Reads the watcher triggered. */
    private final AtomicLong watchReads = new AtomicLong();
    private final WatchOpener watchOpener;
    /** Told after every change of the set (the partitions' ISR re-check). */
    private final ObserverSetListeners listeners;
    private volatile Snapshot snapshot;
    private volatile boolean watching;
    private Thread refresher;
    private Thread watcher;
    // Only touched by the thread holding `refreshing` (or the constructor).
    private boolean failing;
    private long lastWarnNs;
    private byte[] lastReported;

    /** Opens a WatchService on a directory and registers it for entry changes (tests replace it). */
    interface WatchOpener {
        WatchService open(Path dir) throws IOException;
    }

    static final WatchOpener DEFAULT_WATCH = dir -> {
        WatchService service = dir.getFileSystem().newWatchService();
        try {
            dir.register(service, StandardWatchEventKinds.ENTRY_CREATE,
                StandardWatchEventKinds.ENTRY_MODIFY, StandardWatchEventKinds.ENTRY_DELETE);
            return service;
        } catch (IOException | RuntimeException e) {
            service.close();
            throw e;
        }
    };

    ObserverIds(Path path, String fallback, long ttlMs, LongSupplier nanoClock, Path loadedFile) {
        this(path, fallback, ttlMs, nanoClock, loadedFile, DEFAULT_WATCH);
    }

    ObserverIds(Path path, String fallback, long ttlMs, LongSupplier nanoClock, Path loadedFile,
                WatchOpener watchOpener) {
        this(path, fallback, ttlMs, nanoClock, loadedFile, watchOpener, ObserverSetListeners.DEFAULT);
    }

    ObserverIds(Path path, String fallback, long ttlMs, LongSupplier nanoClock, Path loadedFile,
                WatchOpener watchOpener, ObserverSetListeners listeners) {
        this.path = path;
        this.listeners = listeners;
        this.watchOpener = watchOpener;
        this.fallback = fallback;
        this.ttlNs = TimeUnit.MILLISECONDS.toNanos(ttlMs);
        this.nanoClock = nanoClock;
        this.loaded = loadedFile == null ? null : new LoadedReport(loadedFile, nanoClock);
        long now = nanoClock.getAsLong();
        // If the very first read fails, the set is empty.
        this.snapshot = new Snapshot(Set.of(), "empty", now, fallbackReport("empty", Set.of()));
        LOG.info("observer ids: reading {} on every change seen in its directory and every {} ms "
                + "(missing file: ${} then empty); {}",
            path, ttlMs, FALLBACK_ENV, loaded == null
                ? "not reporting what is loaded ($" + LOADED_FILE_ENV + " unset)"
                : "reporting what is loaded to " + loaded.path());
        refresh(now, true);
    }

    /** {@code KAFKA_OBSERVER_IDS_WATCH=false}: no directory watch, the TTL alone (a JVM that may
     *  lag its file by up to the TTL, as the operator's acknowledgement test needs). */
    static final String WATCH_ENV = "KAFKA_OBSERVER_IDS_WATCH";

    static final WatchOpener NO_WATCH = dir -> {
        throw new IOException("disabled by $" + WATCH_ENV + "=false");
    };

    static ObserverIds fromEnvironment(Map<String, String> env, LongSupplier nanoClock) {
        String watch = env.get(WATCH_ENV);
        WatchOpener opener = watch != null && watch.trim().equalsIgnoreCase("false") ? NO_WATCH : DEFAULT_WATCH;
        return new ObserverIds(pathFrom(env), env.get(FALLBACK_ENV), ttlFrom(env), nanoClock,
            loadedFileFrom(env), opener);
    }

    static Path loadedFileFrom(Map<String, String> env) {
        String configured = env.get(LOADED_FILE_ENV);
        if (configured == null || configured.isBlank()) {
            return null;
        }
        try {
            Path p = Path.of(configured.trim());
            if (p.getFileName() == null) {
                throw new IllegalArgumentException("names no file");
            }
            return p;
        } catch (RuntimeException e) {
            LOG.warn("observer ids: ${}={} is not a usable file path ({}); not reporting what is loaded",
                LOADED_FILE_ENV, configured, e.getMessage());
            return null;
        }
    }

    /** The loaded report of a fallback source: a marker comment naming it, then the ids. */
    static byte[] fallbackReport(String source, Set<Integer> ids) {
        StringBuilder out = new StringBuilder(LoadedReport.FALLBACK_MARKER).append(source).append('\n');
        for (Integer id : new java.util.TreeSet<>(ids)) {
            out.append(id).append('\n');
        }
        return out.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static Path pathFrom(Map<String, String> env) {
        String configured = env.get(FILE_ENV);
        if (configured == null || configured.isBlank()) {
            return Path.of(DEFAULT_PATH);
        }
        try {
            return Path.of(configured.trim());
        } catch (RuntimeException e) {
            LOG.warn("observer ids: ${}={} is not a usable path ({}); using {}",
                FILE_ENV, configured, e.getMessage(), DEFAULT_PATH);
            return Path.of(DEFAULT_PATH);
        }
    }

    static long ttlFrom(Map<String, String> env) {
        String configured = env.get(TTL_ENV);
        if (configured == null || configured.isBlank()) {
            return DEFAULT_TTL_MS;
        }
        try {
            long ttl = Long.parseLong(configured.trim());
            if (ttl >= MIN_TTL_MS && ttl <= MAX_TTL_MS) {
                return ttl;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        LOG.warn("observer ids: ${}={} is not a whole number of ms in [{}, {}]; using {} ms",
            TTL_ENV, configured, MIN_TTL_MS, MAX_TTL_MS, DEFAULT_TTL_MS);
        return DEFAULT_TTL_MS;
    }

    public boolean contains(int nodeId) {
        return current().contains(nodeId);
    }

    /** The current set; re-reads the file at most once per TTL, on one thread. */
    public Set<Integer> current() {
        Snapshot s = snapshot;
        long now = nanoClock.getAsLong();
        if (now - s.readAtNs >= ttlNs && refreshing.compareAndSet(false, true)) {
            try {
                // Another thread may have refreshed between our look at the snapshot and the CAS:
                // then the set is fresh and this caller must not read the file a second time.
                if (now - snapshot.readAtNs >= ttlNs) {
                    refresh(now, false);
                }
            } finally {
                refreshing.set(false);
            }
            return snapshot.ids;
        }
        return s.ids;
    }

    /**
     * Re-reads the file now, whatever the snapshot's age (the watcher). If a TTL read is running on
     * another thread it waits for it to finish and then reads again, since that read may have come
     * before the change. Returns false if it could not get its turn in time (the TTL still applies).
     */
    boolean refreshNow() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WATCH_WAIT_FOR_READER_MS);
        while (!refreshing.compareAndSet(false, true)) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.sleep(1);
        }
        try {
            refresh(nanoClock.getAsLong(), false);
        } finally {
            refreshing.set(false);
        }
        return true;
    }

    /**
     * Starts the background threads, idempotent: the TTL refresher (re-checks the file once per
     * TTL) and the directory watcher (re-reads on change).
     */
    public synchronized void startRefresher() {
        if (refresher != null) {
            return;
        }
        watcher = new Thread(this::watchLoop, "observer-ids-watcher");
        watcher.setDaemon(true);
        watcher.start();
        long minSleepNs = TimeUnit.MILLISECONDS.toNanos(1);
        refresher = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    // Until the snapshot is one TTL old: a fixed period would skip a turn whenever
                    // another caller refreshed just after it woke, up to 2 TTL behind the file.
                    long age = nanoClock.getAsLong() - snapshot.readAtNs;
                    TimeUnit.NANOSECONDS.sleep(Math.max(ttlNs - age, minSleepNs));
                    current();
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    LOG.warn("observer ids: refresh failed", e);
                }
            }
        }, "observer-ids-refresher");
        refresher.setDaemon(true);
        refresher.start();
    }

    /** Stops the background threads (tests). */
    synchronized void stopBackground() throws InterruptedException {
        for (Thread t : new Thread[] {refresher, watcher}) {
            if (t != null) {
                t.interrupt();
                t.join(5000);
            }
        }
        refresher = null;
        watcher = null;
    }

    /**
     * The watcher thread: (re-)registers a watch on the file's directory, re-reads after each burst
     * of relevant events, and when the watch cannot be had or breaks (directory deleted or
     * unmounted), retries every WATCH_RETRY_MS while the TTL refresher carries on alone.
     */
    private void watchLoop() {
        Path absolute = path.toAbsolutePath();
        Path dir = absolute.getParent();
        Path name = absolute.getFileName();
        if (dir == null || name == null) {
            LOG.warn("observer ids: {} has no parent directory to watch; re-reading it every {} ms only",
                path, TimeUnit.NANOSECONDS.toMillis(ttlNs));
            return;
        }
        boolean watchFailing = false;
        long lastWarn = 0;
        while (!Thread.currentThread().isInterrupted()) {
            WatchService service;
            try {
                service = watchOpener.open(dir);
            } catch (IOException | RuntimeException e) {
                long now = System.nanoTime();
                if (!watchFailing || now - lastWarn >= WARN_EVERY_NS) {
                    LOG.warn("observer ids: cannot watch {} for changes ({}: {}); re-reading {} every {} ms "
                            + "only, retrying the watch every {} ms",
                        dir, e.getClass().getSimpleName(), e.getMessage(), path,
                        TimeUnit.NANOSECONDS.toMillis(ttlNs), WATCH_RETRY_MS);
                    lastWarn = now;
                }
                watchFailing = true;
                try {
                    Thread.sleep(WATCH_RETRY_MS);
                } catch (InterruptedException ie) {
                    return;
                }
                continue;
            }
            watchFailing = false;
            try {
                watching = true;
                LOG.info("observer ids: watching {} for changes of {}", dir, name);
                // Whatever changed while nothing watched (start-up, a broken watch) is read now.
                refreshNow();
                watchUntilBroken(service, name);
                LOG.warn("observer ids: the watch on {} ended (directory deleted or unmounted?); "
                    + "re-reading {} every {} ms until it is back", dir, path, TimeUnit.NANOSECONDS.toMillis(ttlNs));
            } catch (InterruptedException | java.nio.file.ClosedWatchServiceException e) {
                return;
            } catch (RuntimeException e) {
                watching = false;
                LOG.warn("observer ids: the watch on {} failed; re-registering it in {} ms", dir, WATCH_RETRY_MS, e);
                try {
                    // Not a tight loop if it keeps failing; the TTL covers the pause.
                    Thread.sleep(WATCH_RETRY_MS);
                } catch (InterruptedException ie) {
                    return;
                }
            } finally {
                watching = false;
                try {
                    service.close();
                } catch (IOException e) {
                    // nothing to do: a new one is opened
                }
            }
        }
    }

    /** Re-reads after every settled burst of relevant events; returns when the watch key is no longer valid. */
    private void watchUntilBroken(WatchService service, Path name) throws InterruptedException {
        long settleNs = TimeUnit.MILLISECONDS.toNanos(WATCH_SETTLE_MS);
        while (true) {
            WatchKey key = service.take();
            boolean relevant = relevant(key, name);
            boolean valid = key.reset();
            if (relevant) {
                // Wait until no relevant event came for WATCH_SETTLE_MS (irrelevant ones, such as a
                // log file written in the same directory, do not extend the wait).
                long lastRelevant = System.nanoTime();
                while (valid) {
                    long left = settleNs - (System.nanoTime() - lastRelevant);
                    if (left <= 0) {
                        break;
                    }
                    WatchKey more = service.poll(left, TimeUnit.NANOSECONDS);
                    if (more == null) {
                        break;
                    }
                    if (relevant(more, name)) {
                        lastRelevant = System.nanoTime();
                    }
                    valid = more.reset();
                }
                watchReads.incrementAndGet();
                refreshNow();
            }
            if (!valid) {
                return;
            }
        }
    }

    /** The file itself, the kubelet's "..data"/"..<timestamp>" entries, or lost events. */
    private static boolean relevant(WatchKey key, Path name) {
        boolean relevant = false;
        for (WatchEvent<?> event : key.pollEvents()) {
            if (event.kind() == StandardWatchEventKinds.OVERFLOW) {
                relevant = true;
                continue;
            }
            Object context = event.context();
            if (context instanceof Path) {
                Path changed = (Path) context;
                if (changed.equals(name) || changed.toString().startsWith("..")) {
                    relevant = true;
                }
            }
        }
        return relevant;
    }

    public Path path() {
        return path;
    }

    /** True while the directory watch is registered. */
    public boolean watching() {
        return watching;
    }

    /** Reads of the file so far (tests). */
    long reads() {
        return reads.get();
    }

    /** Reads the watcher triggered so far (tests). */
    long watchReads() {
        return watchReads.get();
    }

    public long readFailures() {
        return readFailures.get();
    }

    /** Failed writes of the loaded report (0 when it is not configured). */
    public long loadedReportFailures() {
        return loaded == null ? 0 : loaded.failures();
    }

    /** The loaded report's writer, if configured (tests). */
    LoadedReport loadedReport() {
        return loaded;
    }

    private void refresh(long now, boolean initial) {
        Snapshot previous = snapshot;
        Snapshot next;
        try {
            next = load(now);
        } catch (Exception e) {
            readFailures.incrementAndGet();
            // Keep the last value; try again after one TTL.
            snapshot = new Snapshot(previous.ids, previous.source, now, previous.report);
            if (initial) {
                // The JVM runs on the empty set it started with: report that.
                report(previous);
            }
            if (!failing || now - lastWarnNs >= WARN_EVERY_NS) {
                LOG.warn("observer ids: cannot use {} ({}: {}); keeping the last value {} from {} ({} failed reads so far)",
                    path, e.getClass().getSimpleName(), e.getMessage(),
                    ObserverIdsFormat.render(previous.ids), previous.source, readFailures.get());
                lastWarnNs = now;
            }
            failing = true;
            return;
        }
        if (failing) {
            LOG.info("observer ids: {} is usable again", path);
            failing = false;
        }
        snapshot = next;
        // After the snapshot is published: the report never runs ahead of what callers use.
        report(next);
        boolean setChanged = !next.ids.equals(previous.ids);
        if (!initial && setChanged) {
            // Also after the publish: a partition's ISR re-check must see the new set.
            listeners.changed();
        }
        if (initial || setChanged || !next.source.equals(previous.source)) {
            LOG.info("observer ids {}: before={} after={} added={} removed={} source={}",
                initial ? "loaded" : "changed",
                ObserverIdsFormat.render(previous.ids), ObserverIdsFormat.render(next.ids),
                ObserverIdsFormat.render(ObserverIdsFormat.minus(next.ids, previous.ids)),
                ObserverIdsFormat.render(ObserverIdsFormat.minus(previous.ids, next.ids)),
                next.source);
        }
    }

    /** Publishes a newly adopted content to the loaded report (refreshing thread only). */
    private void report(Snapshot adopted) {
        if (loaded == null || Arrays.equals(adopted.report, lastReported)) {
            return;
        }
        lastReported = adopted.report;
        loaded.publish(adopted.report);
    }

    private Snapshot load(long now) throws IOException {
        reads.incrementAndGet();
        byte[] bytes;
        try {
            if (Files.size(path) > MAX_FILE_BYTES) {
                throw new IOException("larger than " + MAX_FILE_BYTES + " bytes");
            }
            bytes = Files.readAllBytes(path);
        } catch (NoSuchFileException e) {
            if (fallback != null && !fallback.isBlank()) {
                Set<Integer> ids = ObserverIdsFormat.ids(fallback);
                String source = "env:" + FALLBACK_ENV;
                return new Snapshot(ids, source, now, fallbackReport(source, ids));
            }
            return new Snapshot(Set.of(), "empty", now, fallbackReport("empty", Set.of()));
        }
        // Binary junk is corruption, not "a file without integers".
        String text = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
            .decode(ByteBuffer.wrap(bytes))
            .toString();
        if (text.indexOf('\0') >= 0) {
            throw new IOException("contains NUL bytes");
        }
        ObserverIdsFormat.Parsed parsed = ObserverIdsFormat.parse(text);
        if (parsed.onlyGarbage) {
            // Reading "garbage" as "no observers" would promote every observer at once.
            throw new IOException("has tokens but not one integer");
        }
        return new Snapshot(parsed.ids, "file:" + path, now, bytes);
    }
}
