package io.statecast.client;

import io.grpc.CallCredentials;
import io.grpc.Metadata;
import io.grpc.Status;
import java.util.concurrent.Executor;
import java.util.function.Supplier;

/** A bearer token from the client's token source, sent with each call (schemas/proto/README.md). */
final class TokenCredentials extends CallCredentials {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final Supplier<String> token;

  TokenCredentials(Supplier<String> token) {
    this.token = token;
  }

  @Override
  public void applyRequestMetadata(RequestInfo info, Executor executor, MetadataApplier applier) {
    try {
      Metadata md = new Metadata();
      md.put(AUTHORIZATION, "Bearer " + token.get());
      applier.apply(md);
    } catch (RuntimeException e) {
      applier.fail(Status.UNAUTHENTICATED.withDescription("the token source failed: " + e.getMessage()));
    }
  }
}
