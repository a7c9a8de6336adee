import LMDB
import TeamLog

/// An id as an LMDB key: its UTF-8 bytes, so two ids are one key exactly when they are one `Id`.
enum IdCodec: LMDBCodec {
    static func encode(_ item: Id, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: item.utf8)
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> Id {
        Id(String(decoding: bytes, as: UTF8.self))
    }
}
