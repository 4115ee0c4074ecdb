/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The directory watch with the background threads running. The fake clock never moves unless a
 * test moves it, so with a TTL of 60 s any change seen was seen through the watch.
 */
class ObserverIdsWatchTest {
    private static final long MS = 1_000_000L;
    private static final long LONG_TTL_MS = 60_000;
    /** "Well under the TTL": generous for a loaded 2-core machine, still 1/30 of the TTL. */
    private static final long PICKUP_BOUND_MS = 2000;

    @TempDir
    Path root;
    private Path dir;
    private Path file;
    private Path loaded;
    private final AtomicLong clock = new AtomicLong(0);
    private ObserverIds ids;
    private int revision;

    @BeforeEach
    void setUp() throws Exception {
        dir = root.resolve("observer");
        Files.createDirectories(dir);
        file = dir.resolve("observer.ids");
        loaded = root.resolve("loaded.ids");
    }

    @AfterEach
    void tearDown() throws Exception {
        if (ids != null) {
            ids.stopBackground();
        }
    }

    private ObserverIds start(String fallback, long ttlMs, ObserverIds.WatchOpener opener) throws Exception {
        ids = new ObserverIds(file, fallback, ttlMs, clock::get, loaded, opener);
        ids.startRefresher();
        return ids;
    }

    /**
     * Starts with the watch and waits until it is registered and its catch-up read is over: a
     * change made while that read runs could be picked up by it rather than through the watch (CI
     * saw a swap reported by the catch-up read, then two swaps settled into one watch read).
     * refreshNow takes its turn only after the catch-up read, so once it returns that read is done;
     * it adds one read of its own.
     */
    private ObserverIds startWatching(String fallback) throws Exception {
        start(fallback, LONG_TTL_MS, ObserverIds.DEFAULT_WATCH);
        assertTrue(waitMs(5000, ids::watching) >= 0, "the watch registers");
        // The start-up read and the registration's catch-up read (right after watching() turns true).
        assertTrue(waitMs(5000, () -> ids.reads() >= 2) >= 0, "the catch-up read starts");
        assertTrue(ids.refreshNow(), "the catch-up read ends");
        assertEquals(3, ids.reads(), "nothing but the start-up, catch-up and test reads");
        return ids;
    }

    /** Milliseconds until the condition held (polled every ms), or -1 after timeoutMs. */
    private static long waitMs(long timeoutMs, BooleanSupplier condition) throws InterruptedException {
        long start = System.nanoTime();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - start > timeoutMs * MS) {
                return -1;
            }
            Thread.sleep(1);
        }
        return (System.nanoTime() - start) / MS;
    }

    private boolean reports(String content) {
        try {
            return Files.exists(loaded) && content.equals(Files.readString(loaded, StandardCharsets.UTF_8));
        } catch (IOException e) {
            return false;
        }
    }

    /** The kubelet's first projection of a ConfigMap volume: ..<ts>/key, ..data -> ..<ts>, key -> ..data/key. */
    private void kubeletProject(String content) throws IOException {
        Path ts = dir.resolve("..2026_11_30_17_00_00." + (++revision));
        Files.createDirectory(ts);
        Files.writeString(ts.resolve("observer.ids"), content);
        Files.createSymbolicLink(dir.resolve("..data"), ts.getFileName());
        Files.createSymbolicLink(file, Path.of("..data", "observer.ids"));
    }

    /** The kubelet's update: a new ..<ts> directory, ..data_tmp -> it, renamed over ..data, old one removed. */
    private void kubeletSwap(String content) throws IOException {
        Path old = dir.resolve(Files.readSymbolicLink(dir.resolve("..data")));
        Path ts = dir.resolve("..2026_11_30_17_00_00." + (++revision));
        Files.createDirectory(ts);
        Files.writeString(ts.resolve("observer.ids"), content);
        Path tmp = dir.resolve("..data_tmp");
        Files.createSymbolicLink(tmp, ts.getFileName());
        Files.move(tmp, dir.resolve("..data"), StandardCopyOption.ATOMIC_MOVE);
        deleteTree(old);
    }

    private static void deleteTree(Path p) throws IOException {
        try (Stream<Path> walk = Files.walk(p)) {
            walk.sorted(Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
        }
    }

    @Test
    void aKubeletSymlinkSwapIsPickedUpWellUnderTheTtl() throws Exception {
        kubeletProject("# revision 1\n4\n");
        startWatching(null);
        assertEquals(Set.of(4), ids.current());
        for (int i = 2; i <= 6; i++) {
            String content = "# revision " + i + "\n" + (i % 2 == 0 ? "" : "4\n");
            kubeletSwap(content);
            long took = waitMs(PICKUP_BOUND_MS, () -> reports(content));
            assertTrue(took >= 0, "revision " + i + " reported within " + PICKUP_BOUND_MS + " ms");
            assertEquals(i % 2 == 0 ? Set.of() : Set.of(4), ids.current(), "the set follows the swap");
        }
        assertTrue(ids.watchReads() >= 5);
        assertEquals(0, ids.readFailures());
        assertEquals(0, clock.get(), "no TTL elapsed: the watch did it");
    }

    @Test
    void aPlainRewriteIsPickedUp() throws Exception {
        Files.writeString(file, "4\n");
        startWatching(null);
        Files.writeString(file, "5\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(5))) >= 0);
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> reports("5\n")) >= 0, "the loaded report follows the watch");
    }

    @Test
    void aRenameOverTheFileIsPickedUp() throws Exception {
        Files.writeString(file, "4\n");
        startWatching(null);
        Path tmp = dir.resolve(".observer.ids.tmp");
        Files.writeString(tmp, "6\n");
        Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(6))) >= 0);
    }

    @Test
    void aFileThatAppearsIsPickedUpAndOneThatGoesFallsBack() throws Exception {
        startWatching("9");
        assertEquals(Set.of(9), ids.current());
        Files.writeString(file, "4\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(4))) >= 0);
        Files.delete(file);
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(9))) >= 0);
        assertTrue(waitMs(PICKUP_BOUND_MS,
            () -> reports(LoadedReport.FALLBACK_MARKER + "env:KAFKA_OBSERVER_BROKER_IDS\n9\n")) >= 0);
    }

    @Test
    void garbageSeenThroughTheWatchKeepsTheLastValueAndItsReport() throws Exception {
        kubeletProject("4\n");
        startWatching("9");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> reports("4\n")) >= 0);
        long watchReads = ids.watchReads();
        kubeletSwap("garbage\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.readFailures() == 1) >= 0, "the watch read it");
        assertTrue(ids.watchReads() > watchReads);
        assertEquals(Set.of(4), ids.current());
        kubeletSwap("5\0\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.readFailures() == 2) >= 0);
        assertEquals(Set.of(4), ids.current());
        assertTrue(ids.loadedReport().flush(5000));
        assertTrue(reports("4\n"), "a kept value is not re-reported");
        kubeletSwap("5\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> reports("5\n")) >= 0, "and it recovers");
    }

    @Test
    void otherFilesInTheDirectoryDoNotTriggerReads() throws Exception {
        Files.writeString(file, "4\n");
        startWatching(null);
        Thread.sleep(50);
        long reads = ids.reads();
        assertEquals(3, reads);
        Path log = dir.resolve("server.log");
        for (int i = 0; i < 50; i++) {
            Files.writeString(log, "line " + i + "\n", java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.APPEND);
        }
        Files.createDirectory(dir.resolve("data"));
        Files.delete(log);
        Thread.sleep(300);
        assertEquals(reads, ids.reads());
        // Positive control: the same watch does see the file itself.
        Files.writeString(file, "5\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(5))) >= 0);
    }

    @Test
    void withoutAWatchTheTtlStillAppliesAndNothingIsWorse() throws Exception {
        kubeletProject("4\n");
        AtomicInteger attempts = new AtomicInteger();
        start(null, 100, d -> {
            attempts.incrementAndGet();
            throw new IOException("inotify watch limit reached (test)");
        });
        assertTrue(waitMs(5000, () -> attempts.get() >= 1) >= 0);
        kubeletSwap("5\n");
        Thread.sleep(300);
        assertFalse(ids.watching());
        assertEquals(Set.of(4), ids.current(), "no watch and no TTL elapsed: nothing read yet");
        clock.addAndGet(100 * MS);
        // The TTL refresher (not a caller) picks it up within a TTL of real time plus scheduling.
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> reports("5\n")) >= 0, "the TTL refresher reads it");
        assertEquals(Set.of(5), ids.current());
        assertTrue(waitMs(5000, () -> attempts.get() >= 2) >= 0, "the watch is retried");
        assertEquals(0, ids.watchReads());
    }

    /** A watch service whose take() fails: the watcher must pause, not spin, then re-register. */
    private static final class FailingWatchService implements java.nio.file.WatchService {
        @Override public void close() { }
        @Override public java.nio.file.WatchKey poll() { return null; }
        @Override public java.nio.file.WatchKey poll(long timeout, java.util.concurrent.TimeUnit unit) { return null; }
        @Override public java.nio.file.WatchKey take() { throw new IllegalStateException("broken watch (test)"); }
    }

    @Test
    void aWatchThatThrowsIsRetriedAfterAPauseNotInATightLoop() throws Exception {
        Files.writeString(file, "4\n");
        AtomicInteger attempts = new AtomicInteger();
        start(null, LONG_TTL_MS, d -> attempts.incrementAndGet() == 1
            ? new FailingWatchService() : ObserverIds.DEFAULT_WATCH.open(d));
        assertTrue(waitMs(5000, () -> attempts.get() >= 1) >= 0);
        Thread.sleep(ObserverIds.WATCH_RETRY_MS / 2);
        assertEquals(1, attempts.get(), "no second attempt before the pause is over");
        assertTrue(waitMs(ObserverIds.WATCH_RETRY_MS + PICKUP_BOUND_MS, ids::watching) >= 0);
        assertEquals(2, attempts.get());
        Files.writeString(file, "5\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(5))) >= 0);
    }

    @Test
    void aWatchThatBreaksComesBackWhenTheDirectoryDoes() throws Exception {
        Files.writeString(file, "4\n");
        startWatching("9");
        deleteTree(dir);
        // The deletion of the file is seen through the watch: the fallback, as a TTL read would do.
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(9))) >= 0);
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> !ids.watching()) >= 0, "the watch ended with its directory");
        Files.createDirectories(dir);
        Files.writeString(file, "6\n");
        // Re-registered within WATCH_RETRY_MS, then a catch-up read; the clock never moved.
        assertTrue(waitMs(ObserverIds.WATCH_RETRY_MS + PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(6))) >= 0);
        assertTrue(ids.watching());
        Files.writeString(file, "7\n");
        assertTrue(waitMs(PICKUP_BOUND_MS, () -> ids.current().equals(Set.of(7))) >= 0);
        assertEquals(0, clock.get());
    }
}
