/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.common.utils.Exit;
import org.apache.kafka.server.metrics.KafkaMetricsGroup;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * Start-up proof: the classes the patch replaced must be the ones this JVM loads. A vanilla class
 * ahead of ours on the classpath would silently turn every observer gate off, so the node refuses
 * to start instead.
 *
 * The build writes observer-patch.properties next to this class: the Kafka version the patch was
 * compiled against, the patch sha, every class compiled from a patched source file and the
 * top-level classes that carry the marker.
 */
public final class ObserverPatch {
    /** Every patched top-level class exposes this value (static field or Scala object val). */
    public static final String MARKER = "kafka-observer-operator/observer-patch";
    static final String MARKER_FIELD = "OBSERVER_PATCH_MARKER";
    static final String MARKER_METHOD = "observerPatchMarker";
    private static final String MANIFEST = "observer-patch.properties";

    private static final Logger LOG = LoggerFactory.getLogger(ObserverPatch.class);
    private static volatile boolean started;

    private ObserverPatch() { }

    /** Called first thing in KafkaRaftServer.startup(). Exits the JVM if the proof fails. */
    public static synchronized void verifyOrExit() {
        if (started) {
            return;
        }
        String proof;
        try {
            proof = verify();
        } catch (Exception | LinkageError e) {
            String message = "observer patch NOT active, refusing to start: " + e.getMessage();
            LOG.error(message, e);
            System.err.println(message);
            Exit.exit(1);
            return;
        }
        LOG.info(proof);
        writeProofFile(proof);
        ObserverIds ids = ObserverIds.get();
        ids.startRefresher();
        KafkaMetricsGroup metrics = new KafkaMetricsGroup("kafka.server", "ObserverIds");
        metrics.newGauge("ObserverCount", () -> ids.current().size());
        metrics.newGauge("ReadFailures", ids::readFailures);
        metrics.newGauge("LoadedReportFailures", ids::loadedReportFailures);
        metrics.newGauge("WatchActive", () -> ids.watching() ? 1 : 0);
        started = true;
    }

    /**
     * With $KAFKA_OBSERVER_PATCH_PROOF_FILE set, writes the proof line there (atomically, in the
     * same directory) once the proof passed, so that a probe can tell a patched JVM from one that
     * never ran the proof (a vanilla KafkaRaftServer ahead of ours never calls verifyOrExit). The
     * image's entrypoint deletes the file before it starts the JVM. A failed write is logged, not
     * fatal: the node is patched, only the probe will not see it.
     */
    static void writeProofFile(String proof) {
        String path = System.getenv("KAFKA_OBSERVER_PATCH_PROOF_FILE");
        if (path == null || path.isBlank()) {
            return;
        }
        Path target = Paths.get(path);
        Path tmp = target.resolveSibling("." + target.getFileName() + ".tmp");
        try {
            Files.write(tmp, (proof + "\n").getBytes(StandardCharsets.UTF_8));
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException | RuntimeException e) {
            LOG.warn("cannot write the start-up proof to {} (KAFKA_OBSERVER_PATCH_PROOF_FILE): {}", path, e.toString());
        }
    }

    static String verify() throws IOException, ReflectiveOperationException {
        Properties manifest = new Properties();
        try (InputStream in = ObserverPatch.class.getResourceAsStream(MANIFEST)) {
            if (in == null) {
                throw new IllegalStateException(MANIFEST + " is missing from the patch jar");
            }
            manifest.load(in);
        }
        String version = manifest.getProperty("kafka.version");
        String sha = manifest.getProperty("patch.sha");
        String running = AppInfoParser.getVersion();
        if (!running.equals(version)) {
            throw new IllegalStateException("the patch was built for Kafka " + version +
                " but Kafka " + running + " is on the classpath: rebuild it with e2e/build/kafka-patched.sh " + running);
        }
        URL ours = location(ObserverPatch.class);
        ClassLoader loader = ObserverPatch.class.getClassLoader();
        List<String> patched = list(manifest.getProperty("patched.classes"));
        for (String name : patched) {
            URL from = location(Class.forName(name, false, loader));
            if (!ours.equals(from)) {
                throw new IllegalStateException("class " + name + " was loaded from " + from +
                    ", not from the observer patch jar " + ours + ": put the patch jar first on the classpath");
            }
        }
        List<String> marked = list(manifest.getProperty("marked.classes"));
        for (String name : marked) {
            String value = marker(Class.forName(name, false, loader));
            if (!MARKER.equals(value)) {
                throw new IllegalStateException("class " + name + " carries marker " + value + ", expected " + MARKER);
            }
        }
        if (marked.isEmpty() || patched.isEmpty()) {
            throw new IllegalStateException(MANIFEST + " lists no patched classes");
        }
        return "observer patch active: " + version + " " + sha + " (" + marked.size() + " patched sources, " +
            patched.size() + " classes, loaded from " + ours + ")";
    }

    private static URL location(Class<?> c) {
        CodeSource source = c.getProtectionDomain().getCodeSource();
        if (source == null || source.getLocation() == null) {
            throw new IllegalStateException("class " + c.getName() + " has no code source");
        }
        return source.getLocation();
    }

    private static String marker(Class<?> c) throws ReflectiveOperationException {
        try {
            Field f = c.getField(MARKER_FIELD);
            return String.valueOf(f.get(null));
        } catch (NoSuchFieldException e) {
            // Scala: a val on the companion object, reached through its static forwarder.
            Method m = c.getMethod(MARKER_METHOD);
            return String.valueOf(m.invoke(null));
        }
    }

    private static List<String> list(String csv) {
        List<String> out = new ArrayList<>();
        if (csv != null) {
            for (String s : csv.split(",")) {
                if (!s.isBlank()) {
                    out.add(s.trim());
                }
            }
        }
        return out;
    }
}
