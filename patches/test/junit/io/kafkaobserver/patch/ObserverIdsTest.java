/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The cached reader without its background threads: a fake clock drives the TTL. */
class ObserverIdsTest {
    private static final long MS = 1_000_000L;
    private static final long TTL_MS = 1000;

    @TempDir
    Path dir;
    private Path file;
    private final AtomicLong clock = new AtomicLong(0);

    @BeforeEach
    void setUp() {
        file = dir.resolve("observer.ids");
    }

    private ObserverIds reader(String fallback) {
        return new ObserverIds(file, fallback, TTL_MS, clock::get, null);
    }

    private ObserverIds reader(String fallback, Path loaded) {
        return new ObserverIds(file, fallback, TTL_MS, clock::get, loaded);
    }

    private void write(String text) throws Exception {
        Files.writeString(file, text, StandardCharsets.UTF_8);
    }

    /** Moves the fake clock one TTL on and asks for the set (the read the TTL allows). */
    private Set<Integer> afterTtl(ObserverIds ids) {
        clock.addAndGet(TTL_MS * MS);
        return ids.current();
    }

    @Test
    void theFileIsReadOnceAtStart() throws Exception {
        write("# observers\n4\n");
        ObserverIds ids = reader("9");
        assertEquals(Set.of(4), ids.current());
        assertEquals(1, ids.reads());
        assertEquals(0, ids.readFailures());
    }

    @Test
    void aMissingFileFallsBackToTheEnvironmentThenToEmpty() throws Exception {
        assertEquals(Set.of(4, 5), reader("4, 5").current());
        assertEquals(Set.of(), reader(null).current());
        assertEquals(Set.of(), reader("  ").current());
        write("6\n");
        ObserverIds ids = reader("4, 5");
        assertEquals(Set.of(6), ids.current());
        Files.delete(file);
        assertEquals(Set.of(4, 5), afterTtl(ids), "deleting the file is a fallback, not an error");
        assertEquals(0, ids.readFailures());
    }

    @Test
    void anEmptyFileMeansNoObservers() throws Exception {
        write("4\n");
        ObserverIds ids = reader("9");
        write("");
        assertEquals(Set.of(), afterTtl(ids));
        write("# only comments\n\n");
        assertEquals(Set.of(), afterTtl(ids));
        assertEquals(0, ids.readFailures());
    }

    @Test
    void withinTheTtlTheSnapshotIsKeptAndTheDiskNotRead() throws Exception {
        write("4\n");
        ObserverIds ids = reader(null);
        write("5\n");
        for (int i = 0; i < 1000; i++) {
            clock.set((TTL_MS - 1) * MS * i / 999);
            assertEquals(Set.of(4), ids.current());
        }
        assertEquals(1, ids.reads());
        clock.set(TTL_MS * MS);
        assertEquals(Set.of(5), ids.current());
        assertEquals(2, ids.reads());
        assertEquals(Set.of(5), ids.current());
        assertEquals(2, ids.reads(), "the next read waits for the next TTL");
    }

    /** Each of these keeps the last value, counts a failure, and the reader recovers afterwards. */
    private void assertKeepsLast(byte[] bad) throws Exception {
        write("4\n");
        ObserverIds ids = reader("9");
        Files.write(file, bad);
        assertEquals(Set.of(4), afterTtl(ids));
        assertEquals(1, ids.readFailures());
        assertEquals(Set.of(4), afterTtl(ids), "still kept on the next read");
        assertEquals(2, ids.readFailures());
        write("5\n");
        assertEquals(Set.of(5), afterTtl(ids), "a usable file is adopted again");
    }

    @Test
    void garbageKeepsTheLastValue() throws Exception {
        assertKeepsLast("garbage\nmore garbage\n".getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void nulBytesKeepTheLastValue() throws Exception {
        // Would parse as 5 if NULs counted as separators or were stripped.
        assertKeepsLast("5\0\n".getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void invalidUtf8KeepsTheLastValue() throws Exception {
        assertKeepsLast(new byte[] {'5', '\n', (byte) 0xff, (byte) 0xfe});
    }

    @Test
    void aFileAboveTheSizeLimitKeepsTheLastValue() throws Exception {
        byte[] big = new byte[(int) ObserverIds.MAX_FILE_BYTES + 1];
        java.util.Arrays.fill(big, (byte) ' ');
        big[0] = '5';
        assertKeepsLast(big);
    }

    @Test
    void aFileAtTheSizeLimitIsRead() throws Exception {
        write("4\n");
        ObserverIds ids = reader(null);
        byte[] limit = new byte[(int) ObserverIds.MAX_FILE_BYTES];
        java.util.Arrays.fill(limit, (byte) ' ');
        limit[limit.length - 2] = '5';
        limit[limit.length - 1] = '\n';
        Files.write(file, limit);
        assertEquals(Set.of(5), afterTtl(ids));
        assertEquals(0, ids.readFailures());
    }

    @Test
    void aDirectoryInPlaceOfTheFileKeepsTheLastValue() throws Exception {
        write("4\n");
        ObserverIds ids = reader("9");
        Files.delete(file);
        Files.createDirectory(file);
        assertEquals(Set.of(4), afterTtl(ids), "unreadable is not missing: no fallback");
        assertEquals(1, ids.readFailures());
    }

    @Test
    void anUnreadableFileKeepsTheLastValue() throws Exception {
        Assumptions.assumeFalse("root".equals(System.getProperty("user.name")), "root reads a mode 000 file anyway");
        write("4\n");
        ObserverIds ids = reader("9");
        write("5\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("---------"));
        assertEquals(Set.of(4), afterTtl(ids));
        assertEquals(1, ids.readFailures());
    }

    @Test
    void ifTheFirstReadFailsTheSetIsEmptyNotTheFallback() throws Exception {
        write("garbage\n");
        Path loaded = dir.resolve("loaded.ids");
        ObserverIds ids = reader("9", loaded);
        assertEquals(Set.of(), ids.current());
        assertEquals(1, ids.readFailures());
        assertTrue(ids.loadedReport().flush(5000));
        assertEquals(LoadedReport.FALLBACK_MARKER + "empty\n", Files.readString(loaded));
    }

    @Test
    void everyAdoptedContentIsReportedAndAKeptOneIsNot() throws Exception {
        Path loaded = dir.resolve("loaded.ids");
        write("# revision 1\n4\n");
        ObserverIds ids = reader(null, loaded);
        assertTrue(ids.loadedReport().flush(5000));
        assertEquals("# revision 1\n4\n", Files.readString(loaded));
        write("# revision 2\n4\n");
        afterTtl(ids);
        assertTrue(ids.loadedReport().flush(5000));
        assertEquals("# revision 2\n4\n", Files.readString(loaded), "same ids, new bytes: reported");
        write("garbage\n");
        afterTtl(ids);
        assertTrue(ids.loadedReport().flush(5000));
        assertEquals("# revision 2\n4\n", Files.readString(loaded), "a kept value is not re-reported");
    }

    @ParameterizedTest
    @CsvSource(nullValues = "unset", value = {
        "unset, 1000", "'', 1000", "'   ', 1000", "100, 100", "99, 1000", "60000, 60000", "60001, 1000",
        "0, 1000", "-5, 1000", "' 250 ', 250", "1s, 1000", "1e3, 1000", "9999999999999999999999, 1000"})
    void ttlBounds(String configured, long expected) {
        Map<String, String> env = configured == null ? Map.of() : Map.of(ObserverIds.TTL_ENV, configured);
        assertEquals(expected, ObserverIds.ttlFrom(env));
    }

    @Test
    void theLoadedReportPathComesFromTheEnvironment() {
        assertNull(ObserverIds.loadedFileFrom(Map.of()));
        assertNull(ObserverIds.loadedFileFrom(Map.of(ObserverIds.LOADED_FILE_ENV, " ")));
        assertEquals(Path.of("/x/loaded.ids"),
            ObserverIds.loadedFileFrom(Map.of(ObserverIds.LOADED_FILE_ENV, " /x/loaded.ids ")));
        assertNull(ObserverIds.loadedFileFrom(Map.of(ObserverIds.LOADED_FILE_ENV, "/")), "names no file");
    }

    @Test
    void theFilePathComesFromTheEnvironment() throws Exception {
        write("4\n");
        ObserverIds ids = ObserverIds.fromEnvironment(
            Map.of(ObserverIds.FILE_ENV, " " + file + " ", ObserverIds.FALLBACK_ENV, "9"), clock::get);
        assertEquals(file, ids.path());
        assertEquals(Set.of(4), ids.current());
        assertEquals(Path.of(ObserverIds.DEFAULT_PATH), ObserverIds.fromEnvironment(Map.of(), clock::get).path());
    }

    /**
     * Many threads hammer the set while the fake clock moves one TTL at a time: each TTL allows
     * exactly one read, whichever thread does it, and nobody sees anything but a whole set.
     */
    @Test
    void concurrentReadersReadTheFileOncePerTtl() throws Exception {
        write("4\n");
        ObserverIds ids = reader(null);
        int threads = 4;
        int periods = 50;
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong calls = new AtomicLong();
        List<Throwable> errors = new ArrayList<>();
        CountDownLatch started = new CountDownLatch(threads);
        List<Thread> pool = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread thread = new Thread(() -> {
                started.countDown();
                while (!stop.get()) {
                    Set<Integer> set = ids.current();
                    if (!set.equals(Set.of(4)) && !set.equals(Set.of(5))) {
                        synchronized (errors) {
                            errors.add(new AssertionError("saw " + set));
                        }
                    }
                    calls.incrementAndGet();
                }
            });
            thread.start();
            pool.add(thread);
        }
        started.await();
        for (int i = 1; i <= periods; i++) {
            Set<Integer> expected = i % 2 == 0 ? Set.of(4) : Set.of(5);
            write(i % 2 == 0 ? "4\n" : "5\n");
            clock.addAndGet(TTL_MS * MS);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            // Until the reading thread has published the new set (others keep the old one meanwhile).
            while (!ids.current().equals(expected) && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(expected, ids.current(), "period " + i + " read");
            assertEquals(1 + i, ids.reads(), "one read in period " + i);
            // Give a second (wrong) read in the same period the chance to happen.
            long callsNow = calls.get();
            while (calls.get() < callsNow + 1000 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(1 + i, ids.reads(), "still one read in period " + i);
        }
        stop.set(true);
        for (Thread thread : pool) {
            thread.join();
        }
        assertTrue(errors.isEmpty(), errors.toString());
        assertEquals(1 + periods, ids.reads());
        assertTrue(calls.get() > periods * 1000L);
    }

    @Test
    void aForcedReadAdoptsTheFileWhateverItsAge() throws Exception {
        Path loaded = dir.resolve("loaded.ids");
        write("4\n");
        ObserverIds ids = reader(null, loaded);
        write("5\n");
        assertTrue(ids.refreshNow());
        assertEquals(Set.of(5), ids.current());
        assertTrue(ids.loadedReport().flush(5000));
        assertArrayEquals("5\n".getBytes(StandardCharsets.UTF_8), Files.readAllBytes(loaded));
        write("garbage");
        assertTrue(ids.refreshNow());
        assertEquals(Set.of(5), ids.current(), "keep-last applies to forced reads too");
        assertEquals(1, ids.readFailures());
        assertFalse(ids.watching(), "no background threads were started");
    }
}
