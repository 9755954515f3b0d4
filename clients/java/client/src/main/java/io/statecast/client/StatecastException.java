package io.statecast.client;

/**
 * An error of the statecast client. The message names what is wrong: the view, the player's
 * address and gRPC status of a refusal, or the check that failed.
 */
public class StatecastException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final String view;
  private final boolean permanent;

  /**
   * Creates an error.
   *
   * @param view the view it concerns, or null
   * @param message what is wrong
   * @param permanent retrying with the same configuration cannot succeed
   * @param cause the cause, or null
   */
  public StatecastException(String view, String message, boolean permanent, Throwable cause) {
    super(message, cause);
    this.view = view;
    this.permanent = permanent;
  }

  /** The view the error concerns, or null when it concerns the whole client. */
  public String view() {
    return view;
  }

  /** Whether the client stopped on it: retrying with the same configuration cannot succeed. */
  public boolean permanent() {
    return permanent;
  }
}
