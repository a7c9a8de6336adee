@testable import TeamLogNATS
import Testing

/// The partition's fetch loop, one message at a time (`PartitionWorker.FetchCursor`, which the loop
/// itself keeps), and the failure `killOneOfThreeNATSServers` caught twice: a fetch's answer lost with a
/// killed server. Partition 1 had its inputs at stream sequences 731–753 delivered into the void; the
/// consumer, counting them delivered, sent 754 next, which was applied in their place, and when they came
/// back (redelivered, below the position) they were acked unapplied.
@Suite struct FetchDecisionTests {
    typealias Action = PartitionWorker.FetchAction

    /// Replays deliveries (stream sequence, delivered count, consumer delivery sequence) through a cursor,
    /// committing every submission at once; returns the positions applied, in order, and the seeks. The
    /// first `failingSeeks` seeks fail (the loop then goes on with the old consumer); a seek that succeeds
    /// starts a new consumer at the committed position, whose deliveries, given after it, count from 1.
    func run(_ deliveries: [(UInt64, UInt64, UInt64)], failingSeeks: Int = 0) -> (applied: [UInt64], seeks: Int) {
        var cursor = PartitionWorker.FetchCursor(submitted: 0)
        var committed: UInt64 = 0
        var applied: [UInt64] = []
        var seeks = 0
        for (position, count, delivery) in deliveries {
            switch cursor.take(position: position, deliveredCount: count, delivery: delivery, committed: committed) {
            case .ackDone, .inFlight: continue
            case .reseek:
                seeks += 1
                if seeks > failingSeeks { cursor.sought(after: committed) }
            case .submit:
                applied.append(position)
                committed = position
            }
        }
        return (applied, seeks)
    }

    /// One decision from a cursor at `submitted` whose last delivery was `last`.
    func take(
        _ position: UInt64, _ count: UInt64, _ delivery: UInt64?, last: UInt64, committed: UInt64, submitted: UInt64
    ) -> Action {
        var cursor = PartitionWorker.FetchCursor(submitted: submitted, lastDelivery: last)
        return cursor.take(position: position, deliveredCount: count, delivery: delivery, committed: committed)
    }

    @Test func inOrderDeliveriesAreAppliedOnce() {
        let run = run([(10, 1, 1), (12, 1, 2), (15, 1, 3), (12, 2, 4), (16, 1, 5)])
        #expect(run.applied == [10, 12, 15, 16])
        #expect(run.seeks == 0, "a redelivery of a committed input is only acked")
    }

    /// Deliveries 3–4 (inputs 13 and 14) are lost: the next one to arrive, 15, is delivery 5. The loop
    /// seeks again instead of applying 15 before 13 and 14; the new consumer delivers 13, 14, 15 in order.
    @Test func lostDeliveriesAreDeliveredAgainInOrder() {
        let lost = run([(10, 1, 1), (12, 1, 2), (15, 1, 5), (13, 1, 1), (14, 1, 2), (15, 1, 3)])
        #expect(lost.applied == [10, 12, 13, 14, 15])
        #expect(lost.seeks == 1)
        // Without the delivery count (what the loop did before): 15 goes first, 13 and 14 are acked unapplied
        // when they come back.
        #expect(take(15, 1, nil, last: 2, committed: 12, submitted: 12) == .submit)
        #expect(take(13, 2, nil, last: 2, committed: 15, submitted: 15) == .ackDone)
    }

    /// A seek that fails leaves the gap in view: the next message from the old consumer (delivery 6, one
    /// past the message that showed the gap) asks for a seek again instead of being applied.
    @Test func aFailedSeekIsAskedForAgain() {
        let lost = run(
            [(10, 1, 1), (12, 1, 2), (15, 1, 5), (16, 1, 6), (13, 1, 1), (14, 1, 2), (15, 1, 3), (16, 1, 4)],
            failingSeeks: 1)
        #expect(lost.applied == [10, 12, 13, 14, 15, 16])
        #expect(lost.seeks == 2)
    }

    /// A gap is acted on even when the message that reveals it was done before: otherwise its count
    /// would carry the loop past the gap.
    @Test func aGapSeenOnAMessageDoneBeforeStillSeeksAgain() {
        #expect(take(5, 2, 9, last: 4, committed: 12, submitted: 12) == .reseek)
        #expect(take(5, 2, 5, last: 4, committed: 12, submitted: 12) == .ackDone)
    }

    /// A redelivery past the submitted position may be out of order: seek again (as before).
    @Test func aRedeliveryPastThePositionSeeksAgain() {
        #expect(take(20, 2, 3, last: 2, committed: 12, submitted: 15) == .reseek)
        #expect(take(14, 2, 3, last: 2, committed: 12, submitted: 15) == .inFlight)
    }
}
