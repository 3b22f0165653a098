// Package mirror implements Cluster Mirroring on the destination broker (KIP-1279; spec
// sections 1–8, 10, 11 and 13 of ../shared/design/cluster-mirroring.md): the cluster
// mirrors and their source connections, the fetchers that copy source record batches
// byte for byte into local logs, the mirror partition state machine persisted in
// __mirror_state, failover (StopMirrorTopics) and failback (LOG_ALIGNMENT), and the
// periodic metadata sync of section 9 (sync*.go: topic discovery, topic configs, consumer
// group offsets; ACLs not yet).
//
// Leader-epoch model (spec section 6): the leader-epoch cache of a mirror partition
// follows the batch epochs — mirrored batches keep their source epochs — so
// LastFetchedEpoch/DivergingEpoch work against the source like a follower's. The leader
// epoch of a partition — what Metadata reports, what fetches are fenced with and what
// leader appends stamp — is the controller's (partition.Partition.LeaderEpoch, from the
// partition registration). It is never below the source epoch of an appended batch
// (DLE ≥ SLE): a batch epoch above it is not appended before EPOCH_FENCING has raised the
// leader epoch through the controller (BumpLeaderEpochs, fenceEpoch). Raises go to
// epoch + 10: failover raises to max(0, LME) + 10 (at least the leader epoch + 1), and
// EPOCH_FENCING raises to batch epoch + 10 when a mirrored batch epoch comes within 3
// below the leader epoch (possible only after a raise: a failover followed by mirroring
// again, or a truncation). Because raises are not cache entries, mirrored batches with
// lower epochs after a raise keep exact OffsetForLeaderEpoch answers, and an epoch whose
// batches were truncated is answered with the truncation point (storage
// Log.EndOffsetForEpoch). The partition layer moves the HW (with the ISR).
//
// The mirror path never decodes records: batches are checked with record.Next and
// Batch.Check and appended with storage.Log.AppendAsFollowerVerified.
package mirror
