/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The partitions' hook on observer set changes: who runs, on which thread, how often. */
class ObserverSetListenersTest {
    private static final long MS = 1_000_000L;

    /** A stand-in for a partition: counts the ISR re-checks it was asked for. */
    static final class Owner {
        final AtomicInteger calls = new AtomicInteger();
        final List<String> threads = new CopyOnWriteArrayList<>();

        static void recheck(Owner o) {
            o.calls.incrementAndGet();
            o.threads.add(Thread.currentThread().getName());
        }
    }

    private static void waitFor(String what, java.util.function.BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(1);
        }
    }

    @Test
    void aChangeRunsEveryActionOnceOffTheCallersThread() throws Exception {
        ObserverSetListeners listeners = new ObserverSetListeners();
        Owner a = new Owner();
        Owner b = new Owner();
        listeners.add(a, Owner::recheck);
        listeners.add(b, Owner::recheck);
        listeners.changed();
        waitFor("one round", () -> listeners.rounds() == 1);
        assertEquals(1, a.calls.get());
        assertEquals(1, b.calls.get());
        assertEquals(List.of("observer-set-listeners"), a.threads);
        assertNotEquals(Thread.currentThread().getName(), a.threads.get(0));
        listeners.changed();
        waitFor("a second round", () -> listeners.rounds() == 2);
        assertEquals(2, a.calls.get());
        assertEquals(2, b.calls.get());
    }

    @Test
    void changesDuringARoundCoalesceIntoOneMoreRound() throws Exception {
        ObserverSetListeners listeners = new ObserverSetListeners();
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger blockerCalls = new AtomicInteger();
        Object blocker = new Object();
        listeners.add(blocker, o -> {
            blockerCalls.incrementAndGet();
            inside.countDown();
            try {
                release.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        listeners.changed();
        assertTrue(inside.await(10, TimeUnit.SECONDS));
        for (int i = 0; i < 50; i++) {
            listeners.changed();
        }
        release.countDown();
        waitFor("the coalesced round", () -> listeners.rounds() == 2);
        Thread.sleep(100);
        assertEquals(2, listeners.rounds(), "50 changes during a round are one more round, not 50");
        assertEquals(2, blockerCalls.get());
    }

    @Test
    void aFailingActionDoesNotStopTheOthers() throws Exception {
        ObserverSetListeners listeners = new ObserverSetListeners();
        Owner before = new Owner();
        Owner after = new Owner();
        listeners.add(before, Owner::recheck);
        listeners.add(new Object(), o -> {
            throw new IllegalStateException("a partition half torn down");
        });
        listeners.add(after, Owner::recheck);
        listeners.changed();
        waitFor("one round", () -> listeners.rounds() == 1);
        assertEquals(1, before.calls.get());
        assertEquals(1, after.calls.get());
        assertEquals(1, listeners.failures());
    }

    @Test
    void anOwnerNobodyHoldsIsNotKeptAliveNorRun() throws Exception {
        ObserverSetListeners listeners = new ObserverSetListeners();
        AtomicInteger calls = new AtomicInteger();
        Owner kept = new Owner();
        listeners.add(kept, Owner::recheck);
        WeakReference<Object> probe = addDropped(listeners, calls);
        for (int i = 0; i < 50 && probe.get() != null; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertEquals(null, probe.get(), "the registry kept a dropped owner alive");
        listeners.runRound();
        assertEquals(0, calls.get());
        assertEquals(1, kept.calls.get());
        assertEquals(1, listeners.size(), "the dead entry is swept by the round");
    }

    private static WeakReference<Object> addDropped(ObserverSetListeners listeners, AtomicInteger calls) {
        Object dropped = new Object();
        listeners.add(dropped, o -> calls.incrementAndGet());
        return new WeakReference<>(dropped);
    }

    @Test
    void registrationsSweepDeadEntries() throws Exception {
        ObserverSetListeners listeners = new ObserverSetListeners();
        AtomicInteger calls = new AtomicInteger();
        for (int i = 0; i < ObserverSetListeners.SWEEP_EVERY - 1; i++) {
            addDropped(listeners, calls);
        }
        for (int i = 0; i < 20; i++) {
            System.gc();
            Thread.sleep(5);
        }
        Owner live = new Owner();
        listeners.add(live, Owner::recheck);
        assertTrue(listeners.size() < ObserverSetListeners.SWEEP_EVERY,
            "partitions created and deleted without observer changes must not pile up: " + listeners.size());
    }

    @TempDir
    Path dir;

    @Test
    void theReaderTellsListenersOnlyWhenTheSetChanges() throws Exception {
        Path file = dir.resolve("observer.ids");
        Files.writeString(file, "4\n", StandardCharsets.UTF_8);
        AtomicLong clock = new AtomicLong();
        ObserverSetListeners listeners = new ObserverSetListeners();
        Owner partition = new Owner();
        listeners.add(partition, Owner::recheck);
        ObserverIds ids = new ObserverIds(file, null, 1000, clock::get, null, ObserverIds.NO_WATCH, listeners);
        assertEquals(java.util.Set.of(4), ids.current());
        // The first load is not a change: partitions created later check their ISR anyway.
        ids.refreshNow();
        Files.writeString(file, "# the same set, written differently\n 4 \n", StandardCharsets.UTF_8);
        ids.refreshNow();
        Thread.sleep(100);
        assertEquals(0, listeners.rounds(), "an unchanged set must not wake every partition");
        Files.writeString(file, "# promoted\n", StandardCharsets.UTF_8);
        clock.addAndGet(1000 * MS);
        assertEquals(java.util.Set.of(), ids.current());
        waitFor("the promotion's round", () -> listeners.rounds() == 1);
        assertEquals(1, partition.calls.get());
        Files.writeString(file, "4\n", StandardCharsets.UTF_8);
        ids.refreshNow();
        waitFor("the demotion's round", () -> listeners.rounds() == 2);
        assertEquals(2, partition.calls.get());
    }
}
