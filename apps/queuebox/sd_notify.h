// sd_notify.h: the readiness handshake of a systemd Type=notify service (packaging/
// queuebox.service), written against the protocol so the binary links no libsystemd.
//
// systemd passes the path of a datagram socket in NOTIFY_SOCKET ("/run/systemd/notify", or
// "@name" for the abstract namespace); the service sends newline-separated assignments such as
// "READY=1" or "STOPPING=1". Without NOTIFY_SOCKET (not started by systemd) this does nothing.
//
// Thread-safety: any thread; each call opens and closes its own socket.
#pragma once

#include <string>

namespace queuebox::app {

// Sends `state` ("READY=1\nSTATUS=...") to the service manager. Best effort: returns false when
// there is no NOTIFY_SOCKET or the send failed, and the caller goes on either way.
bool NotifyServiceManager(const std::string& state);

}  // namespace queuebox::app
