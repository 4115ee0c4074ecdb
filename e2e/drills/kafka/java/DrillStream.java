/*
 * The operator drills' message accounting (e2e/drills/operator): a steady acks=all idempotent
 * producer that records every acknowledged record, and a reader that writes down every record a
 * consumer reads afterwards; e2e/drills/operator/lib.sh (account_stream) compares the two: none
 * lost, none duplicated.
 *
 *   stream <topic> <ackedFile> <stopFile> <perSecond>
 *       one record every 1/perSecond s, partitions in turn, keys k<seq>, retried every 100-200 ms
 *       (retry.backoff.max.ms 200, not the default 1 s) while refused; one line per
 *       acknowledgement "<partition> <offset> <key> <ackedAtEpochMs>"; stops when stopFile exists,
 *       waits up to 30 s for what is in flight, prints "sent=N acked=M failed=F"
 *   watch-all <topic> <outFile> <periodMs> <stopFile>
 *       one line per sample: "<epochMs> <leader0> ,<isr0>, <leader1> ,<isr1>, ..." for every
 *       partition in order (leader -1: none; "? ?" for a partition when the describe fails), so
 *       an awk condition tests membership with index($3, ",4,")
 *   read-all <topic> <consumedFile>
 *       reads every partition from the beginning to its end (read_committed), one line per record
 *       "<partition> <offset> <key>" into consumedFile, prints "read=M"; exit 1 when the end is
 *       not reached within 120 s (nothing is counted here: the accounting is the caller's)
 */
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

final class DrillStream {
    private DrillStream() {}

    static int stream(String bootstrap, String topic, String ackedFile, String stopFile, int perSecond) throws Exception {
        Properties p = DrillClient.producerProps("all");
        // An outage of a zone lasts until the operator promotes: keep retrying (idempotence keeps
        // the retries free of duplicates) instead of failing records after a minute.
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "600000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(ProducerConfig.RETRIES_CONFIG, Integer.toString(Integer.MAX_VALUE));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        // Retry every 100-200 ms: the client's default backoff grows to 1 s while a partition is
        // under min ISR, and "writes resumed" would then measure the backoff, not the cluster.
        p.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "200");
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        int sent = 0;
        long periodNanos = 1_000_000_000L / Math.max(1, perSecond);
        try (BufferedWriter out = Files.newBufferedWriter(Path.of(ackedFile), StandardCharsets.UTF_8);
             KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            int partitions = producer.partitionsFor(topic).size();
            long next = System.nanoTime();
            while (!Files.exists(Path.of(stopFile))) {
                String key = "k" + sent;
                producer.send(new ProducerRecord<>(topic, sent % partitions, key, key), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        System.err.println("stream: " + key + " failed: " + e);
                        return;
                    }
                    acked.incrementAndGet();
                    synchronized (out) {
                        try {
                            out.write(md.partition() + " " + md.offset() + " " + key + " " + System.currentTimeMillis() + "\n");
                            out.flush();
                        } catch (java.io.IOException io) {
                            throw new java.io.UncheckedIOException(io);
                        }
                    }
                });
                sent++;
                next += periodNanos;
                long wait = next - System.nanoTime();
                if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            // What cannot be acknowledged within 30 s (a partition still without a leader) is
            // given up: it counts as failed, never as acknowledged.
            producer.close(java.time.Duration.ofSeconds(30));
        }
        System.out.println("sent=" + sent + " acked=" + acked.get() + " failed=" + failed.get());
        return 0;
    }

    static int watchAll(String topic, String outFile, long periodMs, String stopFile) throws Exception {
        org.apache.kafka.clients.admin.Admin admin = DrillClient.admin();
        try (java.io.PrintWriter out = new java.io.PrintWriter(Files.newBufferedWriter(Path.of(outFile)), true)) {
            while (!Files.exists(Path.of(stopFile))) {
                long t0 = System.currentTimeMillis();
                StringBuilder line = new StringBuilder().append(t0);
                try {
                    org.apache.kafka.clients.admin.TopicDescription d = admin.describeTopics(List.of(topic))
                        .allTopicNames().get(3, java.util.concurrent.TimeUnit.SECONDS).get(topic);
                    for (org.apache.kafka.common.TopicPartitionInfo p : d.partitions()) {
                        int leader = p.leader() == null || p.leader().isEmpty() ? -1 : p.leader().id();
                        String isr = p.isr().stream().map(n -> String.valueOf(n.id())).sorted().collect(Collectors.joining(","));
                        line.append(' ').append(leader).append(" ,").append(isr).append(',');
                    }
                } catch (Exception e) {
                    line.append(" ? ?");
                    // A client stuck on a broker whose address vanished (a lost zone sends no
                    // reset) would answer "?" for a long time: start afresh from the bootstrap.
                    admin.close(Duration.ZERO);
                    admin = DrillClient.admin();
                }
                out.println(line);
                long sleep = periodMs - (System.currentTimeMillis() - t0);
                if (sleep > 0) Thread.sleep(sleep);
            }
        } finally {
            admin.close(Duration.ZERO);
        }
        return 0;
    }

    static int readAll(String bootstrap, String topic, String consumedFile) throws Exception {
        Properties p = DrillClient.withFastConnectionSetup(new Properties());
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        int read = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
             BufferedWriter out = Files.newBufferedWriter(Path.of(consumedFile), StandardCharsets.UTF_8)) {
            List<TopicPartition> tps = consumer.partitionsFor(topic).stream()
                .map((PartitionInfo i) -> new TopicPartition(topic, i.partition())).collect(Collectors.toList());
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 120_000;
            while (tps.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("read-all: not at the end of " + topic + " after 120 s (" + read + " records read)");
                    return 1;
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    out.write(r.partition() + " " + r.offset() + " " + r.key() + "\n");
                    read++;
                }
            }
        }
        System.out.println("read=" + read);
        return 0;
    }
}
