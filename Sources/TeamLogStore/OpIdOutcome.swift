public import LMDB
public import TeamLog

/// What happened to the first op submitted with an `opId`: re-sending it answers the same.
///
/// Accepted ops answer `duplicate` with their seq. Ops that `decide` rejected answer the same rejection
/// again without being decided a second time: otherwise a line rejected before a crash could be
/// accepted when the input is fed again against a later state, and the store would no longer equal
/// one clean run. (Lines rejected for their shape carry no usable state and are always re-checked.)
public enum OpIdOutcome: Sendable, Equatable {
    case accepted(seq: UInt64)
    case rejected(Rejection)
}

/// Stored form: 8 bytes big-endian seq for an accepted op; 0xFF, the code, 0x00, the reason otherwise.
public enum OpIdOutcomeCodec: LMDBCodec {
    public static func encode(_ item: OpIdOutcome, into bytes: inout [UInt8]) {
        switch item {
        case .accepted(let seq):
            BigEndianUInt64.encode(seq, into: &bytes)
        case .rejected(let r):
            bytes.append(0xFF)
            bytes.append(contentsOf: r.code.rawValue.utf8)
            bytes.append(0)
            bytes.append(contentsOf: r.reason.utf8)
        }
    }

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws -> OpIdOutcome {
        if bytes.count == 8 { return .accepted(seq: try BigEndianUInt64.decode(bytes)) }
        guard bytes.first == 0xFF, let zero = bytes.firstIndex(of: 0),
            let code = RejectionCode(rawValue: String(decoding: bytes[1..<zero], as: UTF8.self))
        else {
            throw LMDBError(code: .decoding, message: "bad opId outcome", context: "OpIdOutcomeCodec")
        }
        return .rejected(Rejection(code, String(decoding: bytes[(zero + 1)...], as: UTF8.self)))
    }
}
