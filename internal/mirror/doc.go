// Package mirror implements Cluster Mirroring on the destination broker (KIP-1279; spec
// sections 1–8, 10, 11 and 13 of ../shared/design/cluster-mirroring.md): the cluster
// mirrors and their source connections, the fetchers that copy source record batches
// byte for byte into local logs, the mirror partition state machine persisted in
// __mirror_state, failover (StopMirrorTopics) and failback (LOG_ALIGNMENT), and the
// periodic metadata sync of section 9 (sync*.go: topic discovery, topic configs, consumer
// group offsets; ACLs not yet).
//
// Leader-epoch model (single-node kmirror): the leader epoch of a partition — what
// Metadata reports and what leader appends stamp — is max(0, log.LatestEpoch()).
// Mirrored batches keep their source epochs and the epoch cache follows them, so the
// destination leader epoch is never below the source epoch of any appended batch
// (DLE ≥ SLE by construction) and LastFetchedEpoch/DivergingEpoch work against the source
// like a follower's. Every epoch raise is log.AssignEpoch(newEpoch, LEO) and goes to
// epoch + 10: failover raises to max(0, LME) + 10, and EPOCH_FENCING raises to
// batch epoch + 10 when a mirrored batch epoch comes within 3 below a raised local epoch
// (possible only after a failover was followed by mirroring again without truncation).
// A batch epoch above the local epoch is appended directly (the cache follows it), which
// keeps DLE ≥ SLE without a separate fencing step. A truncation by the mirror never
// lowers the leader epoch (partition.truncateLog assigns the previous latest epoch again
// at the new LEO), and LastFetchedEpoch is the epoch of the last batch in the log, not a
// raised epoch. On a single node the HW is the LEO.
//
// The mirror path never decodes records: batches are checked with record.Next and
// Batch.Check and appended with storage.Log.AppendAsFollowerVerified.
package mirror
