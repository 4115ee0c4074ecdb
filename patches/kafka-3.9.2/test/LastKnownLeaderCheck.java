import java.util.Optional;
import java.util.function.IntPredicate;

import org.apache.kafka.common.DirectoryId;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.controller.PartitionChangeBuilder;
import org.apache.kafka.controller.PartitionChangeBuilder.Election;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

/**
 * The last-known-leader election (ELR "balanced recovery") of this release's
 * PartitionChangeBuilder, without Kafka running. Upstream consults isAcceptableLeader there only
 * for a log line, so LeaderAcceptor's observer check does not reach it; our patch refuses an
 * observer in canElectLastKnownLeader. Run by patches/smoke-test.sh with the patch jar first on
 * the classpath and $KAFKA_OBSERVER_IDS_FILE naming a file that lists node 3.
 *
 * The acceptor given to the builder refuses node 3, as the patched LeaderAcceptor does for an
 * observer: a vanilla jar still elects 3 (the acceptor is ignored on this path), ours does not.
 * Node 2 (not an observer) is the positive control: the same path elects it.
 */
public final class LastKnownLeaderCheck {
    private static final int NO_LEADER_CHANGE = -2;
    private static int failures = 0;

    /** The leader the builder elects for a leaderless partition (ISR and ELR empty) whose last known leader is lastKnown. */
    private static int elect(int lastKnown, Election election) {
        Uuid dir = DirectoryId.UNASSIGNED;
        PartitionRegistration partition = new PartitionRegistration.Builder()
            .setReplicas(new int[] {1, 2, 3})
            .setDirectories(new Uuid[] {dir, dir, dir})
            .setIsr(new int[] {})
            .setElr(new int[] {})
            .setLastKnownElr(new int[] {lastKnown})
            .setLeader(-1)
            .setLeaderRecoveryState(LeaderRecoveryState.RECOVERED)
            .setLeaderEpoch(5)
            .setPartitionEpoch(7)
            .build();
        IntPredicate acceptor = id -> id != 3;
        Optional<ApiMessageAndVersion> record = new PartitionChangeBuilder(
            partition, Uuid.randomUuid(), 0, acceptor, MetadataVersion.latestTesting(), 2)
            .setEligibleLeaderReplicasEnabled(true)
            .setDefaultDirProvider(id -> dir)
            .setElection(election)
            .build();
        return record.map(r -> ((PartitionChangeRecord) r.message()).leader()).orElse(NO_LEADER_CHANGE);
    }

    private static void check(String what, boolean ok) {
        System.out.println((ok ? "PASS " : "FAIL ") + what);
        if (!ok) failures++;
    }

    public static void main(String[] args) {
        int control = elect(2, Election.ONLINE);
        check("last known leader 2 (not an observer) is elected (the path is reached), got " + control, control == 2);
        int online = elect(3, Election.ONLINE);
        check("last known leader 3 (observer) is not elected, got " + online, online != 3);
        int unclean = elect(3, Election.UNCLEAN);
        check("last known leader 3 (observer) is not elected by an unclean election either, got " + unclean, unclean != 3);
        System.exit(failures == 0 ? 0 : 1);
    }
}
