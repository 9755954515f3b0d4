package wire

// ProtocolVersion is the version of the player protocol this build speaks, sent in
// Hello.protocol_version. It grows when a client starts to rely on something a player of
// the previous version does not do (a new Hello field that must not be ignored, a new
// message the client needs); a compatible addition (a field an older peer may ignore) keeps
// it. A player serves every client of its version or older (0 is a client that predates
// the field: version 1) and refuses a newer one with FAILED_PRECONDITION.
const ProtocolVersion = 2
