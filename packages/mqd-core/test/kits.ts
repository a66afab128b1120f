// The test kits other packages' tests may use (`@mqd/core/testing`): the conformance target and
// DLL, and the attacker's toolbox for the privilege-separation tests.
export * from './conformance-kit.js';
export * from './dll-attack-kit.js';
export * from './fixture-rig.js';
export * from './queue-checks.js';
export * from './security-kit.js';
