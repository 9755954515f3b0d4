package io.statecast.client;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.okhttp.OkHttpChannelBuilder;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ScheduledExecutorService;

/**
 * Channels of the OkHttp transport ({@link StatecastClient.Transport#OKHTTP}). A class of
 * its own so that grpc-okhttp, an optional dependency, is loaded only by a client that
 * chose it.
 */
final class OkHttpChannels {
  private OkHttpChannels() {}

  /**
   * A channel to addr on the client's threads: calls run on loop (the receive thread, which
   * also runs the transport's timers), blocking work and each connection's frame reader on
   * offload. None of gRPC's shared threads is used, so none is left after close.
   */
  static ManagedChannel channel(String addr, ChannelCredentials creds, String serverName, int maxReceiveBytes,
      int window, ScheduledExecutorService loop, ExecutorService offload) {
    OkHttpChannelBuilder b = OkHttpChannelBuilder.forTarget(addr, creds)
        .maxInboundMessageSize(maxReceiveBytes)
        .flowControlWindow(window)
        .executor(loop)
        .offloadExecutor(offload)
        .transportExecutor(offload)
        .scheduledExecutorService(loop);
    if (serverName != null) {
      b.overrideAuthority(serverName);
    }
    return b.build();
  }
}
