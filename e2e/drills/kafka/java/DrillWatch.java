/*
 * The drill client's long-running and whole-cluster checks (see DrillClient.java for the command
 * list): the sampler behind `watch`, `observer-free`, `brokers` and `config`.
 */
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

final class DrillWatch {
    private DrillWatch() {
    }

    static int watch(String topic, String outFile, long periodMs, String stopFile, String[] brokers) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Integer> brokerIds = Arrays.stream(brokers).map(Integer::parseInt).collect(Collectors.toList());
        try (Admin admin = DrillClient.admin(); PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(outFile)), true)) {
            while (!Files.exists(Path.of(stopFile))) {
                long t0 = System.currentTimeMillis();
                StringBuilder line = new StringBuilder().append(t0);
                try {
                    line.append(' ').append(DrillClient.state(admin, topic).render().replace(" replicas=", " r="));
                } catch (ExecutionException e) {
                    line.append(" leader=? isr=?");
                }
                try {
                    long hw = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get(2, TimeUnit.SECONDS).offset();
                    line.append(" hw=").append(hw);
                } catch (Exception e) {
                    line.append(" hw=?");
                }
                if (!brokerIds.isEmpty()) {
                    // One future per broker: a stopped broker must not blank the others' sizes.
                    Map<Integer, KafkaFuture<Map<String, LogDirDescription>>> dirs =
                        admin.describeLogDirs(brokerIds).descriptions();
                    for (int b : brokerIds) {
                        String size = "?";
                        try {
                            for (LogDirDescription d : dirs.get(b).get(2, TimeUnit.SECONDS).values()) {
                                ReplicaInfo ri = d.replicaInfos().get(tp);
                                if (ri != null) size = String.valueOf(ri.size());
                            }
                        } catch (Exception e) {
                            // stays "?"
                        }
                        line.append(" size.").append(b).append('=').append(size);
                    }
                }
                out.println(line);
                long sleep = periodMs - (System.currentTimeMillis() - t0);
                if (sleep > 0) Thread.sleep(sleep);
            }
        }
        return 0;
    }

    static int config(String topic, String key, String value) throws Exception {
        org.apache.kafka.common.config.ConfigResource r =
            new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.TOPIC, topic);
        org.apache.kafka.clients.admin.AlterConfigOp op = new org.apache.kafka.clients.admin.AlterConfigOp(
            new org.apache.kafka.clients.admin.ConfigEntry(key, value), org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET);
        try (Admin admin = DrillClient.admin()) {
            admin.incrementalAlterConfigs(Map.of(r, List.of(op))).all().get();
        }
        return 0;
    }

    static int observerFree(int node, long timeoutMs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        List<String> offending = new ArrayList<>();
        try (Admin admin = DrillClient.admin()) {
            while (true) {
                offending.clear();
                try {
                    Set<String> names = admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
                    Map<String, TopicDescription> all = admin.describeTopics(names).allTopicNames().get();
                    for (TopicDescription d : all.values()) {
                        for (TopicPartitionInfo p : d.partitions()) {
                            boolean leads = p.leader() != null && p.leader().id() == node;
                            if (leads || DrillClient.ids(p.isr()).contains(node)) {
                                offending.add(d.name() + "-" + p.partition() + (leads ? "(leader)" : "(isr)"));
                            }
                        }
                    }
                    if (offending.isEmpty()) return 0;
                } catch (ExecutionException e) {
                    offending.add(String.valueOf(e.getCause()));
                }
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("node " + node + " still in: " + String.join(" ", offending));
                    return 3;
                }
                Thread.sleep(200);
            }
        }
    }

    static int brokers(int count, long timeoutMs) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (Admin admin = DrillClient.admin()) {
            while (true) {
                try {
                    int n = admin.describeCluster().nodes().get().size();
                    if (n == count) return 0;
                } catch (ExecutionException e) {
                    // retry
                }
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("fewer than " + count + " brokers registered after " + timeoutMs + " ms");
                    return 3;
                }
                Thread.sleep(200);
            }
        }
    }
}
