/**
 * A subscription or resource released by one synchronous call. One definition for every
 * package (server agent events, the web's live connection); `AsyncDisposable` from the
 * language covers the asynchronous ones.
 */
export interface Disposable {
  dispose(): void;
}
