/**
 * The MPI domain's single home: every rule about MPI itself, apart from one snapshot's analysis.
 *
 * - frames.ts: which frames are MPI's. foldMpiName, publicMpiName, mpichInternalName,
 *   isMpiLibraryModule, mpiCallOfFrame, isMpiFrame, isMpiFunction, outermostMpiFrame,
 *   findMpiCall (MpiFrame), isRuntimeFrame, userFrame (UserFrame), FrameName.
 * - operation.ts: the same operation across reads of a rank. opIdentity, opStateKey,
 *   opIdentityFields, opStateFields, requestAddress, pairOperations (KeyedOp, OpPairing,
 *   OpChange).
 * - calls.ts: what a call does to its caller. callKind (CallKind), isBlockingCall,
 *   isWorldCollective, callState (CallState), callCommunicator.
 */
export * from './calls.js';
export * from './frames.js';
export * from './operation.js';
