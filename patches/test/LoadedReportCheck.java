/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 *
 * Checks ObserverIds' loaded report without a Kafka node: a fake clock drives the cache, real
 * files in a temporary directory. Run by patches/smoke-test.sh (compiled against the patch jar
 * into a temporary directory, in the patch's package so it reaches package-private members).
 */
package io.kafkaobserver.patch;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

public final class LoadedReportCheck {
    private static int failures;
    private static final long MS = 1_000_000L;

    private static void check(String what, boolean ok) {
        System.out.println((ok ? "PASS " : "FAIL ") + what);
        if (!ok) {
            failures++;
        }
    }

    private static String read(Path p) throws Exception {
        return Files.exists(p) ? Files.readString(p, StandardCharsets.UTF_8) : null;
    }

    private static String managed(int revision, String ids) {
        return "# Managed by kafka-observer-operator: ObserverSet smoke/smoke, revision " + revision + "\n"
            + "# One observer node id per line. Do not edit: changes are reverted.\n" + ids;
    }

    public static void main(String[] args) throws Exception {
        Path dir = Files.createTempDirectory("koo-loaded-report");
        Path file = dir.resolve("observer.ids");
        Path report = dir.resolve("loaded").resolve("observer.ids");
        Files.createDirectories(report.getParent());
        AtomicLong clock = new AtomicLong(0);
        Files.writeString(file, managed(7, "4\n"));

        ObserverIds ids = new ObserverIds(file, "4, 5", 1000, clock::get, report);
        LoadedReport writer = ids.loadedReport();
        writer.flush(5000);
        check("the first load is reported byte for byte", managed(7, "4\n").equals(read(report)));
        check("the report is readable by another user (rw-r--r--)",
            "rw-r--r--".equals(PosixFilePermissions.toString(Files.getPosixFilePermissions(report))));
        check("no temporary file is left behind", !Files.exists(report.resolveSibling(".observer.ids.tmp")));

        Files.writeString(file, managed(8, "4\n"));
        clock.addAndGet(999 * MS);
        ids.current();
        writer.flush(5000);
        check("within the TTL the JVM keeps (and reports) the old content", managed(7, "4\n").equals(read(report)));
        clock.addAndGet(1 * MS);
        check("after the TTL the set is the same", ids.current().equals(Set.of(4)));
        writer.flush(5000);
        check("a new revision with the same ids is reported", managed(8, "4\n").equals(read(report)));

        Files.delete(report);
        clock.addAndGet(1000 * MS);
        ids.current();
        writer.flush(5000);
        check("unchanged content is not written again", read(report) == null);

        Files.writeString(report, "# put back by the check\n");
        Files.writeString(file, "garbage\n");
        clock.addAndGet(1000 * MS);
        ids.current();
        writer.flush(5000);
        check("a garbage file keeps the last value and its report",
            ids.current().equals(Set.of(4)) && "# put back by the check\n".equals(read(report)));

        Files.delete(file);
        clock.addAndGet(1000 * MS);
        check("a missing file falls back to the environment", ids.current().equals(Set.of(4, 5)));
        writer.flush(5000);
        check("the environment fallback is reported as such",
            (LoadedReport.FALLBACK_MARKER + "env:KAFKA_OBSERVER_BROKER_IDS\n4\n5\n").equals(read(report)));

        ObserverIds empty = new ObserverIds(dir.resolve("absent.ids"), null, 1000, clock::get,
            dir.resolve("loaded").resolve("empty.ids"));
        empty.loadedReport().flush(5000);
        check("no file and no fallback is reported as empty",
            (LoadedReport.FALLBACK_MARKER + "empty\n").equals(read(dir.resolve("loaded").resolve("empty.ids"))));

        // The parent of the report is a regular file: every write fails, nothing else does.
        Files.writeString(file, managed(9, "4\n"));
        ObserverIds broken = new ObserverIds(file, null, 1000, clock::get, file.resolve("loaded"));
        broken.loadedReport().flush(5000);
        check("a report that cannot be written is counted, the set still loads",
            broken.loadedReportFailures() == 1 && broken.current().equals(Set.of(4)));

        check("an unset or blank path reports nothing",
            ObserverIds.loadedFileFrom(java.util.Map.of()) == null
                && ObserverIds.loadedFileFrom(java.util.Map.of(ObserverIds.LOADED_FILE_ENV, " ")) == null);

        try (var paths = Files.walk(dir)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
        System.out.println(failures == 0 ? "loaded report: all checks passed" : "loaded report: " + failures + " failure(s)");
        System.exit(failures == 0 ? 0 : 1);
    }
}
