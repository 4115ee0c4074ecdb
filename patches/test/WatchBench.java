/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 *
 * Driver of patches/watch-bench.sh (run as a single-file program: java WatchBench.java ...).
 * Changes a kubelet-style ConfigMap volume directory the way the kubelet does (a new
 * ..<timestamp> directory with the file, a ..data_tmp symlink to it renamed over ..data, the old
 * directory removed) and measures how long the running Kafka node takes to report the new content
 * in its loaded report ($KAFKA_OBSERVER_IDS_LOADED_FILE): file change -> set loaded in the JVM.
 *
 * Usage: java WatchBench.java <volume dir> <key> <loaded report> <changes> <max pause ms> <label>
 * Between changes it pauses a random 0..<max pause> ms, so changes land at random phases of the
 * node's TTL cycle. Prints one line per change and a summary line
 *   WATCH-BENCH <label> changes=<n> min_ms=.. median_ms=.. p90_ms=.. max_ms=..
 */
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

public final class WatchBench {
    public static void main(String[] args) throws Exception {
        Path volume = Path.of(args[0]);
        String key = args[1];
        Path report = Path.of(args[2]);
        int changes = Integer.parseInt(args[3]);
        int maxPauseMs = Integer.parseInt(args[4]);
        String label = args[5];
        Random random = new Random(12);
        List<Double> took = new ArrayList<>();
        for (int i = 1; i <= changes; i++) {
            Thread.sleep(random.nextInt(maxPauseMs + 1));
            byte[] content = ("# Managed by kafka-observer-operator: ObserverSet bench/bench, revision " + i
                + "\n# One observer node id per line. Do not edit: changes are reverted.\n"
                + (i % 2 == 0 ? "4\n" : "")).getBytes(java.nio.charset.StandardCharsets.UTF_8);
            Path data = volume.resolve("..data");
            Path old = volume.resolve(Files.readSymbolicLink(data));
            Path fresh = volume.resolve("..bench_" + System.nanoTime());
            Files.createDirectory(fresh);
            Files.write(fresh.resolve(key), content);
            Path tmp = volume.resolve("..data_tmp");
            Files.createSymbolicLink(tmp, fresh.getFileName());
            Files.move(tmp, data, StandardCopyOption.ATOMIC_MOVE);
            long changed = System.nanoTime();
            try (Stream<Path> walk = Files.walk(old)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
            long deadline = changed + 30_000_000_000L;
            while (true) {
                byte[] seen = Files.exists(report) ? Files.readAllBytes(report) : null;
                if (Arrays.equals(seen, content)) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    System.out.println("WATCH-BENCH " + label + " FAIL revision " + i + " not reported within 30 s");
                    System.exit(1);
                }
                Thread.sleep(1);
            }
            double ms = (System.nanoTime() - changed) / 1e6;
            took.add(ms);
            System.out.printf("change %d: reported after %.1f ms%n", i, ms);
        }
        took.sort(null);
        System.out.printf("WATCH-BENCH %s changes=%d min_ms=%.1f median_ms=%.1f p90_ms=%.1f max_ms=%.1f%n",
            label, took.size(), took.get(0), percentile(took, 50), percentile(took, 90),
            took.get(took.size() - 1));
    }

    /** Nearest-rank percentile of a sorted list. */
    private static double percentile(List<Double> sorted, int p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.size());
        return sorted.get(Math.max(rank, 1) - 1);
    }
}
