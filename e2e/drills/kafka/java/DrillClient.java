/*
 * The Kafka failure suite's client (e2e/drills/kafka): one short JVM per call, every wait done
 * inside the JVM (polling every 100 ms) so a drill measures the cluster, not JVM start-ups.
 * Talks to the bed's brokers through the kafka-bootstrap Service's ClusterIP (kube-proxy) and
 * then their pod IPs, both reachable from the host. Compiled by e2e/drills/kafka/lib.sh against
 * the bed's Kafka jars (javac --release 17).
 *
 *   DrillClient <bootstrap> create <topic> <replicas e.g. 4:1:2:3>      (min.insync.replicas=2)
 *   DrillClient <bootstrap> delete <topic>
 *   DrillClient <bootstrap> state <topic>                -> leader=1 isr=1,2,3 replicas=4,1,2,3
 *   DrillClient <bootstrap> await <topic> <timeoutMs> <cond>...  -> "<epochMs> <state>" when all hold
 *       ($DRILL_READY_FILE, if set, is written after the first answer)
 *       cond: leader=N | leader!=N | leader=none | leader-in=2,3 | isr=1,2,3 | isr-has=N | isr-lacks=N
 *   DrillClient <bootstrap> produce <topic> <count> <acks> <prefix> [padding bytes, 64]  -> acked=N failed=M
 *   DrillClient <bootstrap> consume <topic> <read_committed|read_uncommitted> [dumpFile] -> count=N sha256=..
 *   DrillClient <bootstrap> txn <topic> <txnId> <transactions> <recordsPerTxn>  (even: commit, odd: abort)
 *   DrillClient <bootstrap> elect <topic> <preferred|unclean>    -> elected=N | error=...
 *   DrillClient <bootstrap> watch <topic> <outFile> <periodMs> <stopFile> [brokerId...]
 *       one line per sample: epochMs leader=.. isr=.. hw=.. size.<broker>=<bytes of the partition>
 *   DrillClient <bootstrap> config <topic> <key> <value>        set one topic config
 *   DrillClient <bootstrap> observer-free <nodeId> <timeoutMs>   no partition led by / in ISR with it
 *   DrillClient <bootstrap> brokers <count> <timeoutMs>          until that many brokers are registered
 *   DrillClient <bootstrap> stream|watch-all|read-all ...   the operator drills' message accounting (DrillStream.java)
 */
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

public final class DrillClient {
    private static String bootstrap;

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            die("usage: DrillClient <bootstrap> <command> [args] (see the source header)");
        }
        bootstrap = args[0];
        String[] a = Arrays.copyOfRange(args, 2, args.length);
        int rc;
        switch (args[1]) {
            case "create": rc = create(a[0], a[1]); break;
            case "delete": rc = delete(a[0]); break;
            case "state": try (Admin admin = admin()) { System.out.println(state(admin, a[0]).render()); } rc = 0; break;
            case "await": rc = await(a[0], Long.parseLong(a[1]), Arrays.copyOfRange(a, 2, a.length)); break;
            case "produce": rc = produce(a[0], Integer.parseInt(a[1]), a[2], a[3], a.length > 4 ? Integer.parseInt(a[4]) : 64); break;
            case "produce-when": rc = produceWhen(a[0], Integer.parseInt(a[1]), a[2], a[3], a[4]); break;
            case "consume": rc = consume(a[0], a[1], a.length > 2 ? a[2] : null); break;
            case "txn": rc = txn(a[0], a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3])); break;
            case "elect": rc = elect(a[0], a[1]); break;
            case "watch": rc = DrillWatch.watch(a[0], a[1], Long.parseLong(a[2]), a[3], Arrays.copyOfRange(a, 4, a.length)); break;
            case "config": rc = DrillWatch.config(a[0], a[1], a[2]); break;
            case "observer-free": rc = DrillWatch.observerFree(Integer.parseInt(a[0]), Long.parseLong(a[1])); break;
            case "brokers": rc = DrillWatch.brokers(Integer.parseInt(a[0]), Long.parseLong(a[1])); break;
            case "stream": rc = DrillStream.stream(bootstrap, a[0], a[1], a[2], Integer.parseInt(a[3])); break;
            case "watch-all": rc = DrillStream.watchAll(a[0], a[1], Long.parseLong(a[2]), a[3]); break;
            case "read-all": rc = DrillStream.readAll(bootstrap, a[0], a[1]); break;
            default: die("unknown command " + args[1]); return;
        }
        System.out.flush();
        // Kafka clients leave non-daemon threads behind on some error paths.
        Runtime.getRuntime().halt(rc);
    }

    static void die(String message) {
        System.err.println("DrillClient: " + message);
        System.err.flush();
        Runtime.getRuntime().halt(2);
    }

    /*
     * A stopped node's pod IP is gone (kafka.sh stop deletes the pod): a connection attempt to it
     * is not refused, its SYN goes unanswered. With the clients' default connection setup timeout
     * (10 s, growing to 30 s) a client that picks a dead broker (the admin's least loaded node,
     * a producer's old leader) would stall for that long; fail such an attempt fast instead.
     */
    static Properties withFastConnectionSetup(Properties p) {
        p.put("socket.connection.setup.timeout.ms", "1500");
        p.put("socket.connection.setup.timeout.max.ms", "3000");
        return p;
    }

    static Admin admin() {
        Properties p = withFastConnectionSetup(new Properties());
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "4000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "8000");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.METADATA_MAX_AGE_CONFIG, "1000");
        return Admin.create(p);
    }

    /** Partition 0 of a topic as the brokers' metadata shows it. */
    static final class State {
        final int leader; // -1 = none
        final List<Integer> isr;
        final List<Integer> replicas;

        State(int leader, List<Integer> isr, List<Integer> replicas) {
            this.leader = leader;
            this.isr = isr;
            this.replicas = replicas;
        }

        String render() {
            return "leader=" + (leader < 0 ? "none" : String.valueOf(leader)) + " isr=" + join(isr) + " replicas=" + join(replicas);
        }
    }

    static String join(java.util.Collection<Integer> ids) {
        return ids.stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    static Set<Integer> idSet(String csv) {
        Set<Integer> out = new TreeSet<>();
        for (String s : csv.split(",")) {
            if (!s.isBlank()) out.add(Integer.parseInt(s.trim()));
        }
        return out;
    }

    static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).collect(Collectors.toList());
    }

    static State state(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        TopicPartitionInfo p = d.partitions().get(0);
        Node leader = p.leader();
        return new State(leader == null || leader.isEmpty() ? -1 : leader.id(), ids(p.isr()), ids(p.replicas()));
    }

    /*
     * Topic creation and deletion go through a broker, which forwards them to the active
     * controller. Right after the active controller's pod is lost its IP answers nothing (no
     * connection refused as from a dead local process): a broker's forwarding channel then waits
     * out its socket connection setup timeout (10 s, growing to 30 s) before it moves to the new
     * controller, longer than one admin call's deadline. Both therefore retry timed-out calls
     * for up to ADMIN_RETRY_MS; a creation that timed out may have happened after all, so an
     * "already exists" counts when the topic has the requested replicas (its name is unique per run).
     */
    static final long ADMIN_RETRY_MS = 60_000;

    static boolean timedOut(ExecutionException e) {
        return e.getCause() instanceof org.apache.kafka.common.errors.TimeoutException
            || e.getCause() instanceof org.apache.kafka.common.errors.RetriableException;
    }

    static int create(String topic, String assignment) throws Exception {
        List<Integer> replicas = Arrays.stream(assignment.split(":")).map(Integer::parseInt).collect(Collectors.toList());
        long deadline = System.currentTimeMillis() + ADMIN_RETRY_MS;
        boolean retried = false;
        try (Admin admin = admin()) {
            while (true) {
                NewTopic t = new NewTopic(topic, Map.of(0, replicas)).configs(Map.of("min.insync.replicas", "2"));
                try {
                    admin.createTopics(List.of(t)).all().get();
                    return 0;
                } catch (ExecutionException e) {
                    // The Admin client retries a timed-out CreateTopics by itself, so "exists" can
                    // answer our very first call; a drill's topic names are unique per run, so a
                    // topic with the requested replicas is ours.
                    if (e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException
                        && state(admin, topic).replicas.equals(replicas)) {
                        System.err.println("DrillClient: " + topic + " was created by an attempt that timed out"
                            + (retried ? "" : " inside the Admin client"));
                        return 0;
                    }
                    if (!timedOut(e) || System.currentTimeMillis() > deadline) throw e;
                    System.err.println("DrillClient: create " + topic + ": " + e.getCause() + "; retrying");
                    retried = true;
                }
            }
        }
    }

    static int delete(String topic) throws Exception {
        long deadline = System.currentTimeMillis() + ADMIN_RETRY_MS;
        try (Admin admin = admin()) {
            while (true) {
                try {
                    admin.deleteTopics(List.of(topic)).all().get();
                    return 0;
                } catch (ExecutionException e) {
                    if (String.valueOf(e.getCause()).contains("UnknownTopicOrPartition")) return 0;
                    if (!timedOut(e) || System.currentTimeMillis() > deadline) throw e;
                    System.err.println("DrillClient: delete " + topic + ": " + e.getCause() + "; retrying");
                }
            }
        }
    }

    static boolean holds(State s, String cond) {
        String[] kv = cond.split("=", 2);
        switch (kv[0]) {
            case "leader": return kv[1].equals("none") ? s.leader < 0 : s.leader == Integer.parseInt(kv[1]);
            case "leader!": return s.leader != Integer.parseInt(kv[1]);
            case "leader-in": return idSet(kv[1]).contains(s.leader);
            case "isr": return new TreeSet<>(s.isr).equals(idSet(kv[1]));
            case "isr-has": return s.isr.contains(Integer.parseInt(kv[1]));
            case "isr-lacks": return !s.isr.contains(Integer.parseInt(kv[1]));
            default: die("unknown condition " + cond); return false;
        }
    }

    static int await(String topic, long timeoutMs, String[] conds) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        String last = "no answer";
        String ready = System.getenv("DRILL_READY_FILE");
        try (Admin admin = admin()) {
            while (true) {
                try {
                    State s = state(admin, topic);
                    last = s.render();
                    if (ready != null && !ready.isBlank() && !Files.exists(Path.of(ready))) {
                        // Connected and answered once: a bench may now make its change.
                        Files.writeString(Path.of(ready), last);
                    }
                    if (Arrays.stream(conds).allMatch(c -> holds(s, c))) {
                        System.out.println(System.currentTimeMillis() + " " + last);
                        return 0;
                    }
                } catch (ExecutionException e) {
                    last = String.valueOf(e.getCause());
                }
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("timeout after " + timeoutMs + " ms waiting for " + String.join(" ", conds) + "; last: " + last);
                    return 3;
                }
                Thread.sleep(100);
            }
        }
    }

    static Properties producerProps(String acks) {
        Properties p = withFastConnectionSetup(new Properties());
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, acks.equals("all") ? "true" : "false");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return p;
    }

    static int produce(String topic, int count, String acks, String prefix, int padding) throws Exception {
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>();
        long started = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(acks))) {
            for (int i = 0; i < count; i++) {
                String key = prefix + "-" + i;
                producer.send(new ProducerRecord<>(topic, 0, key, key + "-" + "x".repeat(padding)), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, e.toString());
                    }
                });
            }
            producer.flush();
        }
        System.out.println("acked=" + acked.get() + " failed=" + failed.get() + " ms=" + (System.currentTimeMillis() - started)
            + (firstError.get() == null ? "" : " error=" + firstError.get().replace(' ', '_')));
        return failed.get() == 0 && acked.get() == count ? 0 : 1;
    }

    /**
     * acks=all records sent the moment {@code trigger} exists, from a producer that is connected
     * and warmed up (one record acknowledged) before {@code ready} is created; prints
     * {@code acked=<n> failed=<n> acked_at=<epoch ms after the last acknowledgement>}. A scenario
     * can then act between "ready" and the trigger without a JVM start in its critical path.
     */
    static int produceWhen(String topic, int count, String prefix, String ready, String trigger) throws Exception {
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps("all"))) {
            producer.send(new ProducerRecord<>(topic, 0, prefix + "-warmup", "warmup")).get(30, TimeUnit.SECONDS);
            Files.createFile(Path.of(ready));
            while (!Files.exists(Path.of(trigger))) Thread.sleep(5);
            for (int i = 0; i < count; i++) {
                String key = prefix + "-" + i;
                producer.send(new ProducerRecord<>(topic, 0, key, key), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, e.toString());
                    }
                });
            }
            producer.flush();
        }
        System.out.println("acked=" + acked.get() + " failed=" + failed.get() + " acked_at=" + System.currentTimeMillis()
            + (firstError.get() == null ? "" : " error=" + firstError.get().replace(' ', '_')));
        return failed.get() == 0 && acked.get() == count ? 0 : 1;
    }

    static int consume(String topic, String isolation, String dumpFile) throws Exception {
        Properties p = withFastConnectionSetup(new Properties());
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        TopicPartition tp = new TopicPartition(topic, 0);
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        List<String> lines = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.position(tp) < end) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("consume: stuck at " + consumer.position(tp) + " of " + end);
                    return 1;
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    String line = r.offset() + " " + r.key() + " " + r.value();
                    sha.update((line + "\n").getBytes(StandardCharsets.UTF_8));
                    lines.add(line);
                }
            }
            System.out.println("count=" + lines.size() + " end=" + end + " sha256=" + hex(sha.digest()));
        }
        if (dumpFile != null) Files.write(Path.of(dumpFile), lines);
        return 0;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    static int txn(String topic, String txnId, int transactions, int perTxn) throws Exception {
        Properties p = producerProps("all");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        int committed = 0, aborted = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int t = 0; t < transactions; t++) {
                boolean commit = t % 2 == 0;
                producer.beginTransaction();
                for (int i = 0; i < perTxn; i++) {
                    String key = (commit ? "c" : "a") + "-" + t + "-" + i;
                    producer.send(new ProducerRecord<>(topic, 0, key, key));
                }
                if (commit) {
                    producer.commitTransaction();
                    committed += perTxn;
                } else {
                    producer.flush();
                    producer.abortTransaction();
                    aborted += perTxn;
                }
            }
        }
        System.out.println("committed=" + committed + " aborted=" + aborted);
        return 0;
    }

    static int elect(String topic, String type) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        ElectionType et = type.equals("unclean") ? ElectionType.UNCLEAN : ElectionType.PREFERRED;
        try (Admin admin = admin()) {
            Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(et, Set.of(tp)).partitions().get();
            Optional<Throwable> err = r.get(tp);
            if (err != null && err.isPresent()) {
                System.out.println("error=" + err.get().getClass().getSimpleName() + ":" + String.valueOf(err.get().getMessage()).replace(' ', '_'));
                return 1;
            }
            System.out.println("elected " + state(admin, topic).render());
            return 0;
        } catch (ExecutionException e) {
            System.out.println("error=" + e.getCause().getClass().getSimpleName() + ":" + String.valueOf(e.getCause().getMessage()).replace(' ', '_'));
            return 1;
        }
    }


}
