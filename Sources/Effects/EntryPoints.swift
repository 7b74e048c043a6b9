import EventLog

/// The four entry points of an effects app, which all reach the one `apply` step: "a tap is
/// a URL the user never saw; a test is a URL with checks; a capture is a URL with a camera
/// running". The origin is the only thing that tells them apart.
extension Origin {
    /// A tap in the app's user interface.
    public static let tap: Origin = "tap"
    /// A URL the app was asked to open, such as a link.
    public static let url: Origin = "url"
    /// A test driving the app.
    public static let test: Origin = "test"
    /// A capture script (`EffectEngine.runCapture`).
    public static let capture: Origin = "capture"

    /// The four, in that order.
    public static let entryPoints: [Origin] = [.tap, .url, .test, .capture]
}
