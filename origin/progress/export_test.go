package progress

// The two readers behind Decode, for the tests that compare them.
var (
	DecodeCanonical = decodeCanonical
	DecodeAny       = decodeAny
)
