package io.kafkaobserver.patch;

import java.lang.ref.WeakReference;
import java.util.Iterator;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Code that runs when the observer set changes: each patched partition registers here, so that a
 * leader re-evaluates its ISR the moment a replica stops being an observer, instead of at that
 * replica's next fetch (which may sit up to replica.fetch.wait.max.ms in the leader's purgatory
 * while producers with acks=all are refused).
 *
 * <p>Owners are held weakly (a deleted partition is not kept alive by this registry) and the action
 * must not capture its owner (pass a function of the owner, e.g. a static method reference).
 * Actions run on one daemon thread ("observer-set-listeners"), never on the thread that published
 * the set: that thread may be a request handler holding a partition's lock, and an action takes
 * partition locks. Changes that arrive while a round runs are coalesced into one more round.
 */
public final class ObserverSetListeners {
    private static final Logger LOG = LoggerFactory.getLogger(ObserverSetListeners.class);
    /** Dead references are swept after this many registrations (and on every round). */
    static final int SWEEP_EVERY = 1024;

    /** The registry the patched Kafka classes and the process-wide ObserverIds use. */
    public static final ObserverSetListeners DEFAULT = new ObserverSetListeners();

    private static final class Entry<T> {
        final WeakReference<T> owner;
        final Consumer<? super T> action;

        Entry(T owner, Consumer<? super T> action) {
            this.owner = new WeakReference<>(owner);
            this.action = action;
        }

        /** Runs the action; false when the owner is gone. */
        boolean run() {
            T o = owner.get();
            if (o == null) {
                return false;
            }
            action.accept(o);
            return true;
        }
    }

    private final ConcurrentLinkedQueue<Entry<?>> entries = new ConcurrentLinkedQueue<>();
    private final AtomicInteger registrations = new AtomicInteger();
    private final Object lock = new Object();
    /** A round was asked for and has not started yet (requests coalesce into it). */
    private boolean pending;
    private Thread runner;
    private final AtomicLong rounds = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();

    /** Registers {@code action(owner)} to run after every change of the observer set. */
    public static <T> void register(T owner, Consumer<? super T> action) {
        DEFAULT.add(owner, action);
    }

    <T> void add(T owner, Consumer<? super T> action) {
        entries.add(new Entry<>(owner, action));
        if (registrations.incrementAndGet() % SWEEP_EVERY == 0) {
            entries.removeIf(e -> e.owner.get() == null);
        }
    }

    /** Asks for one round of every live action, soon, on the runner thread. Never blocks. */
    void changed() {
        synchronized (lock) {
            pending = true;
            if (runner == null) {
                runner = new Thread(this::runLoop, "observer-set-listeners");
                runner.setDaemon(true);
                runner.start();
            }
            lock.notifyAll();
        }
    }

    private void runLoop() {
        while (true) {
            synchronized (lock) {
                while (!pending) {
                    try {
                        lock.wait();
                    } catch (InterruptedException e) {
                        runner = null;
                        return;
                    }
                }
                pending = false;
            }
            runRound();
        }
    }

    /** One round: every live action once, in registration order; dead entries are dropped. */
    void runRound() {
        long started = System.nanoTime();
        int ran = 0;
        for (Iterator<Entry<?>> it = entries.iterator(); it.hasNext(); ) {
            Entry<?> e = it.next();
            try {
                if (!e.run()) {
                    it.remove();
                    continue;
                }
                ran++;
            } catch (RuntimeException | LinkageError err) {
                // One partition's failure must not keep the others from their ISR check.
                long failed = failures.incrementAndGet();
                if (failed == 1 || failed % 1000 == 0) {
                    LOG.warn("observer set listeners: an action failed ({} failures so far)", failed, err);
                }
            }
        }
        rounds.incrementAndGet();
        // One line per change of the set (rare): when the partitions re-checked their ISR.
        LOG.info("observer set changed: {} partitions re-checked their ISR in {} ms (round {})",
            ran, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), rounds.get());
    }

    /** Rounds completed (tests, diagnostics). */
    long rounds() {
        return rounds.get();
    }

    /** Actions that threw (tests, diagnostics). */
    long failures() {
        return failures.get();
    }

    /** Registered entries, live or not yet swept (tests). */
    int size() {
        return entries.size();
    }
}
