import Testing

@testable import TeamLogStore

/// The log's hash chain and an audit's table digests against SHA-256 computed independently (Python's
/// `hashlib` over the same bytes): how the bytes reach the hasher — in one update or several, gathered
/// in a buffer or not — must never change a hash, or every stored log would stop verifying and every
/// digest an operator kept would stop matching.
@Suite struct DigestTests {
    static func hex(_ bytes: [UInt8]) -> String { HashChain.hex(bytes) }

    /// SHA-256 of `previous`, the big-endian seq and the payload.
    @Test func aChainHashIsSHA256OfThePreviousHashTheSeqAndTheEvent() {
        let payload = Array("teamlog".utf8) + (0..<200).map { UInt8(($0 * 11 + 5) & 255) }
        let previous = (0..<32).map { UInt8(($0 * 3) & 255) }
        let seq: UInt64 = 0x0102_0304_0506_0708
        let hash = payload.withUnsafeBytes { HashChain.next(previous: previous, seq: seq, payload: $0) }
        #expect(Self.hex(hash) == "610862633f1fc9445cd820ca289a56402d5f6d11a203c7ff0e01ea6fe4b2bf98")
        // Any length of `previous` is hashed as given (the genesis and every digest are 32 bytes).
        let short = payload.withUnsafeBytes { HashChain.next(previous: [9, 8, 7, 6, 5], seq: seq, payload: $0) }
        #expect(Self.hex(short) == "d2832fbb66122a61179ffdd2f3e600da37e433e189311c4cc6d2b01cb8c5fe40")
        let first = [UInt8]().withUnsafeBytes { HashChain.next(previous: HashChain.genesis, seq: 1, payload: $0) }
        #expect(Self.hex(first) == "08e00266fff0aacc64974f22a53622a7dc458ac1b5fd446ae7c99a4a99a564e6")
    }

    /// 6,000 records (213,000 bytes as hashed: several of the digester's 64 KiB buffers, and a partial
    /// one at the end) give the first 16 hex digits of SHA-256 over each record's 32-bit lengths, key and
    /// value; no record gives zeros.
    @Test func aTableDigestIsSHA256OfItsRecordsInOrder() {
        var digester = TableDigester()
        #expect(digester.digest == String(repeating: "0", count: 16))
        for i in 0..<6_000 {
            let key: [UInt8] = [UInt8(i >> 8), UInt8(i & 255), 0x6B]
            let value = (0..<(i % 50)).map { UInt8((i * 7 + $0) & 255) }
            key.withUnsafeBytes { k in value.withUnsafeBytes { v in digester.add(k, v) } }
        }
        #expect(digester.records == 6_000)
        #expect(digester.digest == "b18ba245500d4b4b")
        #expect(digester.digest == "b18ba245500d4b4b", "reading the digest changes nothing")
    }
}
