import EventLog
import Foundation

extension SHA256 {
    /// The digest as Expo Updates spells a hash: base64url (RFC 4648 §5) without padding.
    consuming func finalizeBase64URL() -> String {
        Data(finalize()).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
