/**
 * The MPI domain's single home: every rule about MPI itself, apart from one snapshot's analysis.
 *
 * - frames.ts: which frames are MPI's. foldMpiName, publicMpiName, mpichInternalName,
 *   isMpiLibraryModule, mpiCallOfFrame, isMpiFrame, isMpiFunction, outermostMpiFrame,
 *   findMpiCall (MpiFrame), isRuntimeFrame, userFrame (UserFrame), FrameName.
 * - operation.ts: the same operation across reads of a rank. opIdentity, opStateKey,
 *   opIdentityFields, opStateFields (the server's hung digest), opKeys and pairOperations
 *   (KeyedOp, OpPairing, OpChange: the progress verdict, the history walk), requestAddress.
 * - world.ts: ranks and peers. worldSizeOf, isWorld, isWorldLike, isWildcardPeer,
 *   peerGlobalRank, PEER_ANY (MPI_ANY_SOURCE) and PEER_UNKNOWN, kept apart. The analysis's
 *   SnapshotIndex (analysis/snapshot-index.ts: worldSize, positionOf, peerRank, peerIdx) is
 *   the one index built on them.
 * - library.ts: what each library's DLL can show. LIBRARY_NAME, QUEUE_LABEL, LIBRARY_QUEUES
 *   (QueueVisibility), LIBRARY_FACTS (LibraryFacts: how its queues read where the analysis
 *   must know it), unavailableQueueText, libraryCaveats, openMpiPml, lengthUnitWords,
 *   EAGER_LIMITS (EagerLimit) with eagerLimitText and bytesText; the
 *   unit itself is lengthUnitOfLibrary/opLengthUnit in snapshot-spec.ts (part of the format).
 * - calls.ts: what a call does to its caller. callKind (CallKind), isBlockingCall,
 *   isWorldCollective, callState (CallState), callCommunicator.
 * - job-label.ts: what a job is called. jobLabel (JobLabel): the program a starter's command
 *   line runs, its arguments, the starter, Slurm's job id and name.
 */
export * from './calls.js';
export * from './frames.js';
export * from './job-label.js';
export * from './library.js';
export * from './operation.js';
export * from './python-frames.js';
export * from './world.js';
