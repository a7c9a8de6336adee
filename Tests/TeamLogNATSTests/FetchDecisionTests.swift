@testable import TeamLogNATS
import Testing

/// The partition's fetch loop, one message at a time (`PartitionWorker.decide`), and the failure
/// `killOneOfThreeNATSServers` caught twice: a fetch's answer lost with a killed server. Partition 1 had
/// its inputs at stream sequences 731–753 delivered into the void; the consumer, counting them delivered,
/// sent 754 next, which was applied in their place, and when they came back (redelivered, below the
/// position) they were acked unapplied.
@Suite struct FetchDecisionTests {
    typealias Action = PartitionWorker.FetchAction

    /// `decide` for one message: stream sequence, delivered count, delivery sequence (`nil`: unknown), the
    /// last delivery sequence, and the committed and submitted positions.
    func decide(
        _ position: UInt64, _ count: UInt64, _ delivery: UInt64?, last: UInt64, committed: UInt64, submitted: UInt64
    ) -> Action {
        PartitionWorker.decide(
            position: position, deliveredCount: count, delivery: delivery, lastDelivery: last, committed: committed,
            submitted: submitted)
    }

    /// Replays a sequence of deliveries (stream sequence, delivered count, consumer delivery sequence)
    /// through the loop's bookkeeping, committing every submission at once; returns the positions applied,
    /// in order, and the reseeks. A reseek starts a new consumer at the committed position: the deliveries
    /// given after it must count from 1 again.
    func run(_ deliveries: [(UInt64, UInt64, UInt64)]) -> (applied: [UInt64], reseeks: Int) {
        var committed: UInt64 = 0
        var submitted: UInt64 = 0
        var lastDelivery: UInt64 = 0
        var applied: [UInt64] = []
        var reseeks = 0
        for (position, count, delivery) in deliveries {
            let action = PartitionWorker.decide(
                position: position, deliveredCount: count, delivery: delivery, lastDelivery: lastDelivery,
                committed: committed, submitted: submitted)
            lastDelivery = max(lastDelivery, delivery)
            switch action {
            case .ackDone, .inFlight: continue
            case .reseek:
                reseeks += 1
                submitted = committed
                lastDelivery = 0
            case .submit:
                applied.append(position)
                submitted = position
                committed = position
            }
        }
        return (applied, reseeks)
    }

    @Test func inOrderDeliveriesAreAppliedOnce() {
        let run = run([(10, 1, 1), (12, 1, 2), (15, 1, 3), (12, 2, 4), (16, 1, 5)])
        #expect(run.applied == [10, 12, 15, 16])
        #expect(run.reseeks == 0, "a redelivery of a committed input is only acked")
    }

    /// Deliveries 3–4 (inputs 13 and 14) are lost: the next one to arrive, 15, is delivery 5. The loop
    /// seeks again instead of applying 15 before 13 and 14; the new consumer delivers 13, 14, 15 in order.
    @Test func lostDeliveriesAreDeliveredAgainInOrder() {
        let lost = run([(10, 1, 1), (12, 1, 2), (15, 1, 5), (13, 1, 1), (14, 1, 2), (15, 1, 3)])
        #expect(lost.applied == [10, 12, 13, 14, 15])
        #expect(lost.reseeks == 1)
        // Without the delivery count (what the loop did before): 15 goes first, 13 and 14 are acked unapplied
        // when they come back.
        #expect(decide(15, 1, nil, last: 2, committed: 12, submitted: 12) == .submit)
        #expect(decide(13, 2, nil, last: 2, committed: 15, submitted: 15) == .ackDone)
    }

    /// A gap is acted on even when the message that reveals it was done before: otherwise its count
    /// would carry the loop past the gap.
    @Test func aGapSeenOnAMessageDoneBeforeStillSeeksAgain() {
        #expect(decide(5, 2, 9, last: 4, committed: 12, submitted: 12) == .reseek)
        #expect(decide(5, 2, 5, last: 4, committed: 12, submitted: 12) == .ackDone)
    }

    /// A redelivery past the submitted position may be out of order: seek again (as before).
    @Test func aRedeliveryPastThePositionSeeksAgain() {
        #expect(decide(20, 2, 3, last: 2, committed: 12, submitted: 15) == .reseek)
        #expect(decide(14, 2, 3, last: 2, committed: 12, submitted: 15) == .inFlight)
    }
}
