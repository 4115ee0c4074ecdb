/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;

/**
 * Reports what this JVM has loaded: every content {@link ObserverIds} adopts is written to one
 * file ($KAFKA_OBSERVER_IDS_LOADED_FILE), which the pod's observer-agent serves to the operator.
 * The operator then counts a pod as having acknowledged a revision only once its JVM uses it,
 * not when the file on the volume holds it (the JVM re-reads the file at most once per TTL).
 *
 * The file holds exactly the bytes the JVM loaded from observer.ids (so the agent parses it with
 * the same parser and the same header as the observer file), or, when the JVM uses a fallback (no
 * observer.ids file), one comment line {@code # kafka-observer-patch loaded: source=<source>}
 * followed by the ids it uses.
 *
 * Writes are atomic (a temporary file in the same directory renamed over the target), happen on
 * one daemon thread (never on the caller that refreshed the set: that may be a fetch request
 * thread) and only the latest content is written when several are queued. A failure is logged
 * (first of a streak, then once a minute) and never reaches the read path.
 */
final class LoadedReport {
    /** First line of a report of a fallback source; the agent reads the source from it. */
    static final String FALLBACK_MARKER = "# kafka-observer-patch loaded: source=";
    private static final long WARN_EVERY_NS = TimeUnit.SECONDS.toNanos(60);
    private static final Logger LOG = LoggerFactory.getLogger(LoadedReport.class);

    private final Path path;
    private final Path temporary;
    private final LongSupplier nanoClock;
    private final AtomicReference<byte[]> pending = new AtomicReference<>();
    private final AtomicBoolean scheduled = new AtomicBoolean();
    private final AtomicLong failures = new AtomicLong();
    private final ExecutorService writer;
    // Only touched by the writer thread.
    private boolean failing;
    private long lastWarnNs;

    LoadedReport(Path path, LongSupplier nanoClock) {
        this.path = path.toAbsolutePath();
        Path name = this.path.getFileName();
        this.temporary = this.path.resolveSibling("." + name + ".tmp");
        this.nanoClock = nanoClock;
        this.writer = Executors.newSingleThreadExecutor(runnable -> {
            Thread t = new Thread(runnable, "observer-ids-loaded-report");
            t.setDaemon(true);
            return t;
        });
    }

    Path path() {
        return path;
    }

    long failures() {
        return failures.get();
    }

    /** Queues {@code content} to be written; returns at once. The latest queued content wins. */
    void publish(byte[] content) {
        pending.set(content);
        if (scheduled.compareAndSet(false, true)) {
            try {
                writer.execute(this::drain);
            } catch (RuntimeException e) {
                scheduled.set(false);
                LOG.warn("observer ids: cannot queue the loaded report for {}: {}", path, e.toString());
            }
        }
    }

    /** Blocks until everything published so far is written (tests and shutdown). */
    boolean flush(long timeoutMs) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (scheduled.get() || pending.get() != null) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    private void drain() {
        while (true) {
            byte[] content = pending.getAndSet(null);
            if (content == null) {
                // `scheduled` stays set while a write runs, so flush() never returns mid-write.
                scheduled.set(false);
                // A publish between the getAndSet and the set(false) saw `scheduled` and queued
                // nothing: take its content here unless a new drain was queued for it meanwhile.
                if (pending.get() == null || !scheduled.compareAndSet(false, true)) {
                    return;
                }
                continue;
            }
            write(content);
        }
    }

    private void write(byte[] content) {
        try {
            Files.write(temporary, content, StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
            // The agent runs as another user: the report must be world-readable whatever the umask.
            try {
                Files.setPosixFilePermissions(temporary, PosixFilePermissions.fromString("rw-r--r--"));
            } catch (UnsupportedOperationException e) {
                // not a POSIX file system: keep the default permissions
            }
            try {
                Files.move(temporary, path, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                throw new IOException("the file system cannot rename atomically within " + path.getParent(), e);
            }
        } catch (IOException | RuntimeException e) {
            failures.incrementAndGet();
            try {
                Files.deleteIfExists(temporary);
            } catch (IOException | RuntimeException ignored) {
                // reported below; the next write truncates it anyway
            }
            long now = nanoClock.getAsLong();
            if (!failing || now - lastWarnNs >= WARN_EVERY_NS) {
                LOG.warn("observer ids: cannot write what this JVM loaded to {} ({}: {}); the operator "
                        + "waits for this report, fix ${} or the volume mounted there ({} failed writes so far)",
                    path, e.getClass().getSimpleName(), e.getMessage(), ObserverIds.LOADED_FILE_ENV,
                    failures.get());
                lastWarnNs = now;
            }
            failing = true;
            return;
        }
        if (failing) {
            LOG.info("observer ids: writing the loaded report to {} again", path);
            failing = false;
        }
    }
}
