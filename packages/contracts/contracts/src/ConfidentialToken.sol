// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {BN254, Point} from "./BN254.sol";

/// The slice of ERC-20 that ConfidentialToken uses on its underlying asset.
interface IERC20Minimal {
    function transfer(address to, uint256 amount) external returns (bool);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

/// @title ConfidentialToken
/// @notice Confidential balances of one ERC-20 asset (USDG; ETH through WrappedEther).
///
/// Every address holds an encrypted balance: three BN254 G1 points (ΣC, ΣD_owner, ΣD_guardian),
/// sums of twisted-ElGamal ciphertexts C = a·G + r·H with decryption handles D = r·PK. The
/// contract only adds and subtracts points (ecAdd precompile); it never sees an amount, except
/// on `shield` and `publicTransfer` where the amount is public anyway.
///
/// A key registry holds each account's encryption key PK = s⁻¹·H, registered with a Schnorr
/// proof of possession that is verified here, on chain.
///
/// Amount-dependent rules (enough balance, ciphertext well formed, spend limits) are decided
/// by the guardian, which signs an EIP-712 attestation per transfer. A debit also needs the
/// sender's own signature over the very same typed data (version 2): the two signatures, not
/// msg.sender, authorise it, so any relayer can submit it. Replays are refused with a
/// per-sender unordered nonce bitmap (Permit2 style): exactly once, in any submission order.
///
/// No single key moves funds. The guardian signer attests debits but cannot make one without the
/// sender's signature; the sender's wallet cannot debit without the guardian's attestation; the
/// owner holds no path to any balance: it can only propose a new guardian, which takes effect
/// after a delay fixed at deployment (at least 48 hours on mainnet) and which the current
/// guardian can veto at most twice per proposed signer (the owner can always cancel its own).
/// There is no pause, no upgrade and no sweep.
contract ConfidentialToken {
    // ---------------------------------------------------------------- constants

    string public constant NAME = "PPS ConfidentialToken";
    string public constant VERSION = "2";

    bytes32 public constant CONFIDENTIAL_TRANSFER_TYPEHASH = keccak256(
        "ConfidentialTransfer(address from,address to,bytes32 transferId,uint256 nonce,bytes32 ciphertextDigest,bytes32 sealedDigest,uint64 deadline)"
    );
    bytes32 public constant PUBLIC_TRANSFER_TYPEHASH = keccak256(
        "PublicTransfer(address from,address to,bytes32 transferId,uint256 nonce,uint256 amount,bytes32 ciphertextDigest,uint64 deadline)"
    );
    bytes32 public constant KEY_REGISTRATION_TYPEHASH =
        keccak256("KeyRegistration(address account,uint256 keyX,uint256 keyY)");
    /// Signed by both the guardian (the new balance encrypts the same amount as the current one)
    /// and the account (it wants the new key), for `rotateEncryptionKey`.
    bytes32 public constant KEY_ROTATION_TYPEHASH = keccak256(
        "KeyRotation(address account,uint256 nonce,uint256 keyX,uint256 keyY,bytes32 previousBalanceDigest,bytes32 balanceDigest,uint64 deadline)"
    );
    /// How many proposals to the same new signer the same guardian may veto. The next proposal to
    /// that signer can only be cancelled by the owner: a guardian delays its replacement by at
    /// most this many rotation delays, and cannot prevent it.
    uint256 public constant MAX_GUARDIAN_VETOES_PER_SIGNER = 2;
    // CANCEL_GUARDIAN_ROTATION_TYPEHASH and MAINNET_CHAIN_ID have no getter on purpose: the
    // dispatcher compares selectors one by one in ascending order (22 gas each), and these two
    // would sort before publicTransfer's and shield's and make every unshield and shield
    // dearer. docs/contracts.md states both, and the tests check them (a cancellation signed
    // from src/typedData.ts, a deployment on chain id 4663). For the same reason the rotation
    // functions whose names are free were named so their selectors sort after shield's.

    /// The current guardian's veto of one pending rotation, submitted by anyone.
    bytes32 private constant CANCEL_GUARDIAN_ROTATION_TYPEHASH =
        keccak256("CancelGuardianRotation(uint256 proposalId,address newSigner)");

    /// The service's mainnet. There the rotation delay may not be shorter than the minimum below.
    uint256 private constant MAINNET_CHAIN_ID = 4663;
    /// 48 hours: time for the guardian, and anyone watching the proposal event, to notice a
    /// rotation it did not agree to and cancel it, over a weekend included.
    uint256 public constant MAINNET_ROTATION_DELAY_MIN_SECONDS = 172_800;
    /// 30 days: a longer delay would leave a lost guardian key in place for longer than any
    /// operator would accept, and keeps every timestamp sum far inside uint64.
    uint256 public constant ROTATION_DELAY_MAX_SECONDS = 2_592_000;
    /// 14 days: once executable, a rotation stays executable this long and then lapses, so a
    /// forgotten proposal cannot be executed by anyone months later.
    uint256 public constant ROTATION_EXECUTION_WINDOW_SECONDS = 1_209_600;

    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");

    /// secp256k1 n / 2: signatures with a larger s are the malleated twin of a low-s one.
    uint256 private constant SECP256K1_N_HALF = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    uint256 private constant PROOF_OF_POSSESSION_LENGTH = 96;
    uint256 private constant SIGNATURE_LENGTH = 65;
    /// Root hints per batch item: the sender's three stored points, then the recipient's.
    uint256 private constant ROOT_HINTS_PER_ITEM = 6;

    // ---------------------------------------------------------------- types

    /// An address's encrypted balance: the sum of its commitments and the matching sums of the
    /// handles for the owner's key and for the guardian's key.
    struct EncryptedBalance {
        Point commitment;
        Point ownerHandle;
        Point guardianHandle;
    }

    /// An encrypted balance as stored: each point compressed to one word (BN254.compress), three
    /// words instead of six (D66). `encryptedBalanceOf` returns the points in full.
    struct StoredBalance {
        uint256 commitment;
        uint256 ownerHandle;
        uint256 guardianHandle;
    }

    /// A confidential transfer as submitted: the fields of the ConfidentialTransfer attestation,
    /// with the four points in place of their digest. The points must stay consecutive: the
    /// ciphertext digest is taken over their calldata in one run.
    struct ConfidentialTransferRequest {
        address from;
        address to;
        bytes32 transferId;
        uint256 nonce;
        Point commitment;
        Point fromHandle;
        Point toHandle;
        Point guardianHandle;
        bytes32 sealedDigest;
        uint64 deadline;
    }

    /// Why `confidentialTransferBatch` skipped an item instead of applying it. Each item of a
    /// batch stands alone: a stale or bad item must not block the others, and a batch sent
    /// again must apply nothing twice, so an item that cannot apply is skipped with an event
    /// naming the reason instead of reverting the whole transaction.
    enum SkipReason {
        /// The sender's replay nonce is used: this transfer (or another with the same nonce) was applied before.
        NonceUsed,
        /// The attestation's deadline has passed.
        DeadlineExpired,
        /// The signature is malformed, high-s, or not the current guardian's over these fields.
        GuardianSignatureInvalid,
        /// The account signature is malformed, high-s, or not the sender's over these fields.
        AccountSignatureInvalid
    }

    /// A proposed guardian rotation. `newSigner` is zero when none is pending.
    struct GuardianRotation {
        uint256 proposalId;
        address newSigner;
        uint64 executableAt;
        uint64 expiresAt;
        Point newEncryptionKey;
    }

    /// A public transfer (confidential: false, or an unshield when to == from) as submitted.
    struct PublicTransferRequest {
        address from;
        address to;
        bytes32 transferId;
        uint256 nonce;
        uint256 amount;
        Point commitment;
        Point fromHandle;
        Point guardianHandle;
        uint64 deadline;
    }

    /// A key rotation as submitted: the account's new encryption key and its balance encrypted
    /// to it (commitment, owner handle, guardian handle), to replace the current one. The three
    /// balance points must stay consecutive: their digest is taken over calldata in one run.
    struct KeyRotationRequest {
        address account;
        uint256 nonce;
        Point newKey;
        Point commitment;
        Point ownerHandle;
        Point guardianHandle;
        uint64 deadline;
    }

    // ---------------------------------------------------------------- storage

    /// The ERC-20 whose units this contract holds while they are shielded.
    IERC20Minimal public immutable asset;

    uint256 private immutable cachedChainId;
    bytes32 private immutable cachedDomainSeparator;

    /// Seconds between a rotation's proposal and the earliest time it can be executed.
    uint256 public immutable rotationDelaySeconds;

    /// Proposes and cancels guardian rotations, hands ownership over; nothing else.
    address public owner;
    /// The secp256k1 address whose EIP-712 attestations authorise debits.
    address public guardianSigner;
    /// The guardian's BN254 encryption key, published so clients can check D_guardian's target.
    Point private guardianKey;

    mapping(address account => Point) private encryptionKeys;
    mapping(address account => StoredBalance) private balances;
    /// Used replay nonces of each sender: bit (nonce & 255) of word (nonce >> 8).
    mapping(address sender => mapping(uint256 word => uint256 bits)) public nonceBitmap;

    /// Proposals made so far; the latest one's id. Ids are never reused, so a guardian's
    /// cancellation signature applies to one proposal only. No getter, for the dispatch cost
    /// noted above: `pendingGuardianRotation()` and the events carry the ids.
    uint256 private rotationProposalCount;
    /// At most one rotation is pending at a time.
    GuardianRotation private pendingRotation;
    /// Vetoes used by a guardian signer against proposals of one new signer. No public getter of
    /// its own name (dispatch cost); `guardianVetoesUsed` reads it.
    mapping(address guardian => mapping(address newSigner => uint256 count)) private vetoes;

    // ---------------------------------------------------------------- events

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event GuardianRotated(address indexed previousSigner, address indexed newSigner, Point encryptionKey);
    event GuardianRotationProposed(
        uint256 indexed proposalId,
        address indexed currentSigner,
        address indexed newSigner,
        Point encryptionKey,
        uint64 executableAt,
        uint64 expiresAt
    );
    event GuardianRotationCancelled(uint256 indexed proposalId, address indexed newSigner, address cancelledBy);
    event KeyRegistered(address indexed account, Point encryptionKey);
    /// An account's key replaced and its balance re-encrypted to it (`rotateEncryptionKey`).
    event EncryptionKeyRotated(
        address indexed account,
        uint256 nonce,
        Point encryptionKey,
        Point commitment,
        Point ownerHandle,
        Point guardianHandle
    );
    event Shielded(address indexed from, address indexed to, uint256 amount);
    event ConfidentialTransfer(
        address indexed from,
        address indexed to,
        bytes32 indexed transferId,
        uint256 nonce,
        Point commitment,
        Point fromHandle,
        Point toHandle,
        Point guardianHandle,
        bytes32 sealedDigest
    );
    /// A batch item that was not applied. The transfer id is the second indexed topic (the
    /// applied event's is the third), so a search for a transfer's applied event by its third
    /// topic never finds this one.
    event ConfidentialTransferSkipped(
        address indexed from, bytes32 indexed transferId, uint256 nonce, SkipReason reason
    );
    event PublicTransfer(
        address indexed from,
        address indexed to,
        bytes32 indexed transferId,
        uint256 nonce,
        uint256 amount,
        Point commitment,
        Point fromHandle,
        Point guardianHandle
    );

    // ---------------------------------------------------------------- errors

    error NotOwner(address caller);
    error ZeroAddress();
    error InvalidEncryptionKey();
    error KeyAlreadyRegistered(address account);
    error ProofOfPossessionInvalid();
    error AccountSignatureInvalid(address account);
    error AmountOutOfRange(uint256 amount);
    error DeadlineExpired(uint64 deadline);
    error NonceUsed(address sender, uint256 nonce);
    error SignatureMalformed();
    error BatchLengthMismatch(uint256 requests, uint256 given);
    error SignatureHighS();
    error GuardianSignatureInvalid();
    error AssetTransferFailed();
    error GuardianRotationDelayOutOfRange(uint256 delaySeconds, uint256 minSeconds, uint256 maxSeconds);
    error GuardianRotationPending(uint256 proposalId);
    error NoGuardianRotationPending();
    error GuardianRotationNotReady(uint64 executableAt);
    error GuardianRotationExpired(uint64 expiresAt);
    error GuardianVetoesExhausted(address newSigner);
    error KeyNotRegistered(address account);

    // ---------------------------------------------------------------- construction and roles

    /// `rotationDelaySeconds_` is fixed for the contract's life: at least 48 hours on
    /// mainnet (chain id 4663), anything up to 30 days elsewhere (0 included, for tests).
    constructor(
        IERC20Minimal asset_,
        address owner_,
        address guardianSigner_,
        Point memory guardianKey_,
        uint256 rotationDelaySeconds_
    ) {
        if (address(asset_) == address(0) || owner_ == address(0) || guardianSigner_ == address(0)) {
            revert ZeroAddress();
        }
        _requireEncryptionKey(guardianKey_.x, guardianKey_.y);
        uint256 delayMinSeconds = block.chainid == MAINNET_CHAIN_ID ? MAINNET_ROTATION_DELAY_MIN_SECONDS : 0;
        if (rotationDelaySeconds_ < delayMinSeconds || rotationDelaySeconds_ > ROTATION_DELAY_MAX_SECONDS) {
            revert GuardianRotationDelayOutOfRange(rotationDelaySeconds_, delayMinSeconds, ROTATION_DELAY_MAX_SECONDS);
        }
        rotationDelaySeconds = rotationDelaySeconds_;
        asset = asset_;
        owner = owner_;
        guardianSigner = guardianSigner_;
        guardianKey = guardianKey_;
        cachedChainId = block.chainid;
        cachedDomainSeparator = _buildDomainSeparator();
        emit OwnershipTransferred(address(0), owner_);
        emit GuardianRotated(address(0), guardianSigner_, guardianKey_);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    // ---------------------------------------------------------------- guardian rotation

    /// Proposes replacing the guardian's signing address and encryption key, executable from
    /// `block.timestamp + rotationDelaySeconds` for 14 days. Whoever signs attestations
    /// can debit any balance, so the owner alone must never choose the signer at once: the
    /// delay gives the current guardian (and anyone watching `GuardianRotationProposed`) time to
    /// cancel. One proposal at a time; a lapsed one may be replaced without cancelling it.
    function proposeGuardianRotation(address newSigner, Point calldata newEncryptionKey)
        external
        onlyOwner
        returns (uint256 proposalId)
    {
        if (newSigner == address(0)) revert ZeroAddress();
        _requireEncryptionKey(newEncryptionKey.x, newEncryptionKey.y);
        GuardianRotation storage pending = pendingRotation;
        if (pending.newSigner != address(0) && block.timestamp <= pending.expiresAt) {
            revert GuardianRotationPending(pending.proposalId);
        }
        proposalId = ++rotationProposalCount;
        // Both sums stay below 2^64: the delay and the window are at most 30 and 14 days.
        uint64 executableAt = uint64(block.timestamp + rotationDelaySeconds);
        uint64 expiresAt = executableAt + uint64(ROTATION_EXECUTION_WINDOW_SECONDS);
        pending.proposalId = proposalId;
        pending.newSigner = newSigner;
        pending.executableAt = executableAt;
        pending.expiresAt = expiresAt;
        pending.newEncryptionKey = newEncryptionKey;
        emit GuardianRotationProposed(proposalId, guardianSigner, newSigner, newEncryptionKey, executableAt, expiresAt);
    }

    /// Carries out the pending rotation once its delay has passed, before it lapses. Anyone may
    /// call it: the proposal was public for the whole delay and both the owner and the guardian
    /// could cancel it, so who sends this adds nothing, and the owner key need not come back.
    /// Attestations signed by the previous signer stop verifying at once; their nonces stay
    /// unused, so the new guardian can attest the same transfers again.
    function executeGuardianRotation() external {
        GuardianRotation storage pending = pendingRotation;
        address newSigner = pending.newSigner;
        if (newSigner == address(0)) revert NoGuardianRotationPending();
        if (block.timestamp < pending.executableAt) revert GuardianRotationNotReady(pending.executableAt);
        if (block.timestamp > pending.expiresAt) revert GuardianRotationExpired(pending.expiresAt);
        Point memory newEncryptionKey = pending.newEncryptionKey;
        delete pendingRotation;
        emit GuardianRotated(guardianSigner, newSigner, newEncryptionKey);
        guardianSigner = newSigner;
        guardianKey = newEncryptionKey;
    }

    /// The owner withdraws the pending proposal (a lapsed one too).
    function cancelGuardianRotation() external onlyOwner {
        _cancelGuardianRotation(msg.sender);
    }

    /// The current guardian vetoes the pending proposal with its EIP-712
    /// `CancelGuardianRotation(proposalId, newSigner)` signature; anyone may submit it. The
    /// guardian never sends transactions and its signer holds no ether, exactly as for its
    /// attestations, so a signature any account can relay is its only practical way to act.
    ///
    /// Bounded (D52): a guardian may veto proposals of the same new signer at most
    /// `MAX_GUARDIAN_VETOES_PER_SIGNER` times. An owner replacing a guardian that vetoes
    /// proposes the same signer again; the third proposal goes through after its delay. A
    /// compromised guardian can so delay its replacement by two delays, never prevent it.
    function cancelGuardianRotationBySignature(bytes calldata guardianSignature) external {
        GuardianRotation storage pending = pendingRotation;
        // Checked before the signature, so a signature over a finished proposal reads as
        // "nothing pending" rather than as a bad signature.
        address newSigner = pending.newSigner;
        if (newSigner == address(0)) revert NoGuardianRotationPending();
        bytes32 structHash = keccak256(abi.encode(CANCEL_GUARDIAN_ROTATION_TYPEHASH, pending.proposalId, newSigner));
        _requireGuardianSignature(structHash, guardianSignature);
        address signer = guardianSigner;
        uint256 used = vetoes[signer][newSigner];
        if (used >= MAX_GUARDIAN_VETOES_PER_SIGNER) revert GuardianVetoesExhausted(newSigner);
        vetoes[signer][newSigner] = used + 1;
        _cancelGuardianRotation(signer);
    }

    /// How many of its vetoes `guardian` has used against proposals of `newSigner`.
    function guardianVetoesUsed(address guardian, address newSigner) external view returns (uint256) {
        return vetoes[guardian][newSigner];
    }

    function _cancelGuardianRotation(address cancelledBy) private {
        GuardianRotation storage pending = pendingRotation;
        address newSigner = pending.newSigner;
        if (newSigner == address(0)) revert NoGuardianRotationPending();
        uint256 proposalId = pending.proposalId;
        delete pendingRotation;
        emit GuardianRotationCancelled(proposalId, newSigner, cancelledBy);
    }

    // ---------------------------------------------------------------- key registry

    /// Registers `encryptionKey` for msg.sender. `proof` is the 96-byte proof of possession
    /// R || z bound to this chain, this contract and msg.sender. One registration per account:
    /// a new key would orphan the balance encrypted under the old one.
    function register(Point calldata encryptionKey, bytes calldata proof) external {
        _register(msg.sender, encryptionKey, proof);
    }

    /// Registers `encryptionKey` for `account`, submitted by anyone (a relayer paying gas).
    /// Two things are needed: the proof of possession (whoever knows s consents to the key being
    /// used for `account`) and `account`'s own EIP-712 KeyRegistration signature (the account
    /// consents to the key). The proof alone is not enough: anyone can prove possession of a key
    /// they made up and would otherwise bind it to a stranger's address first.
    function registerFor(
        address account,
        Point calldata encryptionKey,
        bytes calldata proof,
        bytes calldata accountSignature
    ) external {
        bytes32 structHash =
            keccak256(abi.encode(KEY_REGISTRATION_TYPEHASH, account, encryptionKey.x, encryptionKey.y));
        address signer = _recover(_hashTypedData(structHash), accountSignature);
        if (signer == address(0) || signer != account) revert AccountSignatureInvalid(account);
        _register(account, encryptionKey, proof);
    }

    function _register(address account, Point calldata encryptionKey, bytes calldata proof) private {
        Point storage stored = encryptionKeys[account];
        if (stored.x != 0 || stored.y != 0) revert KeyAlreadyRegistered(account);
        _requireEncryptionKey(encryptionKey.x, encryptionKey.y);
        _verifyProofOfPossession(account, encryptionKey.x, encryptionKey.y, proof);
        stored.x = encryptionKey.x;
        stored.y = encryptionKey.y;
        emit KeyRegistered(account, encryptionKey);
    }

    /// Replaces `request.account`'s encryption key with `request.newKey` and its encrypted
    /// balance with the three points of the request (the same amount, encrypted to the new key
    /// and the current guardian key). Needs all of: the proof of possession of the new key bound
    /// to the account (as for `register`), the guardian's KeyRotation attestation (the new
    /// ciphertext holds the amount the current one does: only the guardian can tell) and the
    /// account's signature over the same typed data (the account wants this key). The attested
    /// `previousBalanceDigest` is checked against the stored balance, so a transfer that lands
    /// between attestation and submission makes this revert (`GuardianSignatureInvalid`) rather
    /// than drop that transfer's amount. The nonce is the sender nonce of transfers: exactly once,
    /// and `isNonceUsed` tells whether it applied. Anyone may submit it.
    function rotateEncryptionKey(
        KeyRotationRequest calldata request,
        bytes calldata proof,
        bytes calldata guardianSignature,
        bytes calldata accountSignature
    ) external {
        if (block.timestamp > request.deadline) revert DeadlineExpired(request.deadline);
        address account = request.account;
        Point storage stored = encryptionKeys[account];
        if (stored.x == 0 && stored.y == 0) revert KeyNotRegistered(account);
        _requireEncryptionKey(request.newKey.x, request.newKey.y);
        _verifyProofOfPossession(account, request.newKey.x, request.newKey.y, proof);
        StoredBalance storage balance = balances[account];
        bytes32 digest = _hashTypedData(
            keccak256(
                abi.encode(
                    KEY_ROTATION_TYPEHASH,
                    account,
                    request.nonce,
                    request.newKey.x,
                    request.newKey.y,
                    _balanceDigest(balance),
                    _digestPoints(request.commitment, 3),
                    request.deadline
                )
            )
        );
        if (_recover(digest, guardianSignature) != guardianSigner) revert GuardianSignatureInvalid();
        if (_recover(digest, accountSignature) != account) revert AccountSignatureInvalid(account);
        _useNonce(account, request.nonce);
        BN254.requireValid(request.commitment.x, request.commitment.y);
        BN254.requireValid(request.ownerHandle.x, request.ownerHandle.y);
        BN254.requireValid(request.guardianHandle.x, request.guardianHandle.y);
        balance.commitment = BN254.compress(request.commitment.x, request.commitment.y);
        balance.ownerHandle = BN254.compress(request.ownerHandle.x, request.ownerHandle.y);
        balance.guardianHandle = BN254.compress(request.guardianHandle.x, request.guardianHandle.y);
        stored.x = request.newKey.x;
        stored.y = request.newKey.y;
        emit EncryptionKeyRotated(
            account, request.nonce, request.newKey, request.commitment, request.ownerHandle, request.guardianHandle
        );
    }

    /// keccak256 of a stored balance's three points in full (commitment, owner handle, guardian
    /// handle), x || y each: what `encryptedBalanceOf` returns, so the signers can compute it.
    function _balanceDigest(StoredBalance storage balance) private view returns (bytes32) {
        return keccak256(abi.encode(_expand(balance)));
    }

    /// A stored balance with its points decompressed.
    function _expand(StoredBalance storage balance) private view returns (EncryptedBalance memory expanded) {
        (expanded.commitment.x, expanded.commitment.y) = BN254.decompress(balance.commitment);
        (expanded.ownerHandle.x, expanded.ownerHandle.y) = BN254.decompress(balance.ownerHandle);
        (expanded.guardianHandle.x, expanded.guardianHandle.y) = BN254.decompress(balance.guardianHandle);
    }

    /// Schnorr proof of knowledge of s with s·PK = H: z·PK == R + c·H with
    /// c = keccak256("PPS/v1/key-pop", chainId, contract, account, PK, R) mod n.
    function _verifyProofOfPossession(address account, uint256 keyX, uint256 keyY, bytes calldata proof)
        private
        view
    {
        if (proof.length != PROOF_OF_POSSESSION_LENGTH) revert ProofOfPossessionInvalid();
        uint256 rx = uint256(bytes32(proof[0:32]));
        uint256 ry = uint256(bytes32(proof[32:64]));
        uint256 z = uint256(bytes32(proof[64:96]));
        if (z >= BN254.N) revert ProofOfPossessionInvalid();
        uint256 challenge = uint256(
            keccak256(abi.encodePacked("PPS/v1/key-pop", block.chainid, address(this), account, keyX, keyY, rx, ry))
        ) % BN254.N;
        (uint256 leftX, uint256 leftY) = BN254.mul(keyX, keyY, z);
        (uint256 hx, uint256 hy) = BN254.mul(BN254.H_X, BN254.H_Y, challenge);
        (uint256 rightX, uint256 rightY) = BN254.add(rx, ry, hx, hy);
        if (leftX != rightX || leftY != rightY) revert ProofOfPossessionInvalid();
    }

    /// An encryption key is a valid G1 point other than the identity.
    function _requireEncryptionKey(uint256 x, uint256 y) private view {
        if (x == 0 && y == 0) revert InvalidEncryptionKey();
        BN254.requireValid(x, y);
    }

    // ---------------------------------------------------------------- shield

    /// Moves `amount` public units from msg.sender (which approved this contract) into `to`'s
    /// confidential balance as the ciphertext (amount·G, 0, 0): the amount is public at this
    /// point, so no randomness is needed, and C − s·0 = amount·G still decrypts.
    function shield(address to, uint256 amount) external {
        if (to == address(0)) revert ZeroAddress();
        if (amount == 0 || amount >= BN254.N) revert AmountOutOfRange(amount);
        (uint256 x, uint256 y) = BN254.mul(BN254.G_X, BN254.G_Y, amount);
        _addInto(_slotOf(balances[to]), x, y, msg.data.length, _workspace(8));
        emit Shielded(msg.sender, to, amount);
        if (!asset.transferFrom(msg.sender, address(this), amount)) revert AssetTransferFailed();
    }

    // ---------------------------------------------------------------- transfers

    /// Debits (C, D_from, D_guardian) from `request.from` and credits (C, D_to, D_guardian) to
    /// `request.to`, authorised by the guardian's ConfidentialTransfer attestation and by
    /// `request.from`'s signature over the same typed data (D51: neither alone moves anything).
    /// `request.sealedDigest` commits to the sealed boxes (amount and memo for sender and
    /// recipient) that are kept off chain. The request is one static struct, so its calldata is
    /// the same as that of flat parameters, without the stack limit of eleven of them.
    function confidentialTransfer(
        ConfidentialTransferRequest calldata request,
        bytes calldata guardianSignature,
        bytes calldata accountSignature
    ) external {
        // The recipient's registration is not re-checked here (a cold SLOAD, 2.1k gas a
        // transfer): the guardian attests D_to = r·PK_to against the registered key, which it
        // cannot do for an unregistered recipient.
        if (block.timestamp > request.deadline) revert DeadlineExpired(request.deadline);
        _requireBothSignatures(
            _hashTypedData(_confidentialStructHash(request)), request.from, guardianSignature, accountSignature
        );
        _useNonce(request.from, request.nonce);
        _applyConfidential(request, msg.data.length, _workspace(8));
    }

    /// Applies many confidential transfers in one transaction: one relayer signature and one
    /// 21k base cost for all of them, and storage slots shared by items (a party's balance, a
    /// sender's nonce word) written warm after the first. Each item keeps its own guardian
    /// attestation, exactly as `confidentialTransfer` checks it: the guardian decides and signs
    /// each transfer when its request arrives, and the relayer forms batches later from whatever
    /// is queued, so no single attestation over a batch can exist without a second guardian
    /// round trip per batch, which would put the guardian back on the settlement path.
    ///
    /// An item whose replay nonce is used, whose deadline has passed, whose first signature is not
    /// the guardian's or whose second is not its sender's is skipped with
    /// `ConfidentialTransferSkipped` and changes nothing; the others still apply. Points the guardian attested are valid, so a precompile failure on a
    /// point (which only a forged item could carry, and a forged item fails its signature check
    /// before any point is added) reverts the whole batch. Returns how many items applied.
    ///
    /// `rootHints` (D70) is empty or holds six words per item: the y of the sender's and then the
    /// recipient's stored commitment, owner handle and guardian handle as the submitter expects
    /// them, 0 for none. Reading a stored point otherwise costs a modexp square root (4k gas
    /// under Osaka pricing). A hint is only a candidate, checked as the batch's table of roots
    /// is (`_addInto`): a wrong, stale or missing one costs that modexp and never changes a
    /// sum, so hints are not signed and anyone submitting may supply them.
    function confidentialTransferBatch(
        ConfidentialTransferRequest[] calldata requests,
        bytes[] calldata guardianSignatures,
        bytes[] calldata accountSignatures,
        uint256[] calldata rootHints
    ) external returns (uint256 applied) {
        uint256 count = requests.length;
        if (guardianSignatures.length != count) revert BatchLengthMismatch(count, guardianSignatures.length);
        if (accountSignatures.length != count) revert BatchLengthMismatch(count, accountSignatures.length);
        // Item i's hints start at calldata byte hintAt + i · hintStep. Without hints, every item
        // reads them at the end of calldata, where calldataload gives zeros.
        uint256 hintAt = msg.data.length;
        uint256 hintStep;
        if (rootHints.length != 0) {
            if (rootHints.length != count * ROOT_HINTS_PER_ITEM) revert BatchLengthMismatch(count, rootHints.length);
            assembly ("memory-safe") {
                hintAt := rootHints.offset
            }
            hintStep = ROOT_HINTS_PER_ITEM * 32;
        }
        // Read once for the whole batch: neither changes within a transaction.
        bytes32 separator = domainSeparator();
        address signer = guardianSigner;
        uint256 work = _workspace(_rootTableLength(count));
        for (uint256 i; i < count; ++i) {
            ConfidentialTransferRequest calldata request = requests[i];
            // The nonce first: an item sent again is skipped before paying for ecrecover, and is
            // reported as applied-before even once its deadline has passed.
            uint256 bit = 1 << (request.nonce & 0xff);
            mapping(uint256 => uint256) storage bitmap = nonceBitmap[request.from];
            uint256 word = bitmap[request.nonce >> 8];
            SkipReason reason;
            bytes32 digest;
            if (word & bit != 0) {
                reason = SkipReason.NonceUsed;
            } else if (block.timestamp > request.deadline) {
                reason = SkipReason.DeadlineExpired;
            } else if (
                _recoverOrZero(
                    digest = keccak256(abi.encodePacked("\x19\x01", separator, _confidentialStructHash(request))),
                    guardianSignatures[i]
                ) != signer
            ) {
                reason = SkipReason.GuardianSignatureInvalid;
            } else if (_recoverOrZero(digest, accountSignatures[i]) != request.from || request.from == address(0)) {
                reason = SkipReason.AccountSignatureInvalid;
            } else {
                bitmap[request.nonce >> 8] = word | bit;
                // Unchecked: a calldata position, below 2^32.
                unchecked {
                    _applyConfidential(request, hintAt + i * hintStep, work);
                }
                ++applied;
                continue;
            }
            emit ConfidentialTransferSkipped(request.from, request.transferId, request.nonce, reason);
        }
    }

    function _confidentialStructHash(ConfidentialTransferRequest calldata request) private pure returns (bytes32) {
        return keccak256(
            abi.encode(
                CONFIDENTIAL_TRANSFER_TYPEHASH,
                request.from,
                request.to,
                request.transferId,
                request.nonce,
                _digestPoints(request.commitment, 4),
                request.sealedDigest,
                request.deadline
            )
        );
    }

    /// The effects of an attested confidential transfer whose nonce has just been used.
    /// `hintAt` is the calldata position of its six root hints (`confidentialTransferBatch`; the
    /// end of calldata for none). `work` (`_workspace`) keeps the y of each sum written, for a
    /// later item of the batch that reads it.
    function _applyConfidential(ConfidentialTransferRequest calldata request, uint256 hintAt, uint256 work) private {
        _debit(_slotOf(balances[request.from]), request.commitment, request.fromHandle, request.guardianHandle, hintAt, work);
        // Unchecked: a calldata position, below 2^32.
        unchecked {
            _credit(_slotOf(balances[request.to]), request.commitment, request.toHandle, request.guardianHandle, hintAt + 0x60, work);
        }
        emit ConfidentialTransfer(
            request.from,
            request.to,
            request.transferId,
            request.nonce,
            request.commitment,
            request.fromHandle,
            request.toHandle,
            request.guardianHandle,
            request.sealedDigest
        );
    }

    /// Debits (C, D_from, D_guardian) from `request.from` and pays `request.amount` public units
    /// to `request.to`, authorised by the guardian's PublicTransfer attestation that the
    /// ciphertext encrypts that amount and by `request.from`'s signature over the same typed data
    /// (amount and recipient included). With `to == from` this is the unshield.
    function publicTransfer(
        PublicTransferRequest calldata request,
        bytes calldata guardianSignature,
        bytes calldata accountSignature
    ) external {
        if (block.timestamp > request.deadline) revert DeadlineExpired(request.deadline);
        if (request.to == address(0)) revert ZeroAddress();
        if (request.amount == 0 || request.amount >= BN254.N) revert AmountOutOfRange(request.amount);
        bytes32 structHash = keccak256(
            abi.encode(
                PUBLIC_TRANSFER_TYPEHASH,
                request.from,
                request.to,
                request.transferId,
                request.nonce,
                request.amount,
                _digestPoints(request.commitment, 3),
                request.deadline
            )
        );
        _requireBothSignatures(_hashTypedData(structHash), request.from, guardianSignature, accountSignature);
        _useNonce(request.from, request.nonce);
        _debit(
            _slotOf(balances[request.from]), request.commitment, request.fromHandle, request.guardianHandle, msg.data.length, _workspace(8)
        );
        emit PublicTransfer(
            request.from,
            request.to,
            request.transferId,
            request.nonce,
            request.amount,
            request.commitment,
            request.fromHandle,
            request.guardianHandle
        );
        if (!asset.transfer(request.to, request.amount)) revert AssetTransferFailed();
    }

    /// keccak256 of `count` consecutive calldata points starting at `first`, each as x || y.
    /// Static struct parameters are laid out back to back in calldata, so the points of one call
    /// form a single contiguous 64·count-byte run.
    function _digestPoints(Point calldata first, uint256 count) private pure returns (bytes32 digest) {
        assembly ("memory-safe") {
            let buffer := mload(0x40)
            let length := mul(count, 0x40)
            calldatacopy(buffer, first, length)
            digest := keccak256(buffer, length)
        }
    }

    function _useNonce(address sender, uint256 nonce) private {
        uint256 bit = 1 << (nonce & 0xff);
        mapping(uint256 => uint256) storage bitmap = nonceBitmap[sender];
        uint256 word = bitmap[nonce >> 8];
        if (word & bit != 0) revert NonceUsed(sender, nonce);
        bitmap[nonce >> 8] = word | bit;
    }

    function _credit(
        uint256 slot,
        Point calldata commitment,
        Point calldata ownerHandle,
        Point calldata guardianHandle,
        uint256 hintAt,
        uint256 work
    ) private {
        // Unchecked: the slots of one struct, as solc computes them (no wrap below 2^256 − 2),
        // and calldata positions.
        unchecked {
            _addInto(slot, commitment.x, commitment.y, hintAt, work);
            _addInto(slot + 1, ownerHandle.x, ownerHandle.y, hintAt + 0x20, work);
            _addInto(slot + 2, guardianHandle.x, guardianHandle.y, hintAt + 0x40, work);
        }
    }

    function _debit(
        uint256 slot,
        Point calldata commitment,
        Point calldata ownerHandle,
        Point calldata guardianHandle,
        uint256 hintAt,
        uint256 work
    ) private {
        unchecked {
            _addInto(slot, commitment.x, BN254.negateY(commitment.y), hintAt, work);
            _addInto(slot + 1, ownerHandle.x, BN254.negateY(ownerHandle.y), hintAt + 0x20, work);
            _addInto(slot + 2, guardianHandle.x, BN254.negateY(guardianHandle.y), hintAt + 0x40, work);
        }
    }

    /// The first of a stored balance's three slots (commitment, owner handle, guardian handle).
    function _slotOf(StoredBalance storage balance) private pure returns (uint256 slot) {
        assembly ("memory-safe") {
            slot := balance.slot
        }
    }

    /// Memory for `_addInto`, laid out once per call (a batch, a transfer, a shield), so that the
    /// six points of a transfer write only what changes:
    ///   work + 0x000 … 0x0a0  modexp input: 32, 32, 32 (lengths), x³ + 3, (p + 1) / 4, p
    ///   work + 0x0c0 … 0x120  ecAdd input: the stored sum's x and y (modexp writes y there), the
    ///                         added point's x and y; ecAdd writes the new sum over the first two
    ///   work + 0x140          mask of the table of roots (its length, a power of two, minus one)
    ///   work + 0x160 …        the table of roots: y of the sum last written to each slot, at
    ///                         index slot & mask
    /// The table is not zeroed: whatever memory held before is only ever a candidate y, checked.
    function _workspace(uint256 entries) private pure returns (uint256 work) {
        uint256 p = BN254.P;
        uint256 exponent = BN254.SQRT_EXPONENT;
        assembly ("memory-safe") {
            work := mload(0x40)
            mstore(0x40, add(work, add(0x160, shl(5, entries))))
            mstore(work, 0x20)
            mstore(add(work, 0x20), 0x20)
            mstore(add(work, 0x40), 0x20)
            mstore(add(work, 0x80), exponent)
            mstore(add(work, 0xa0), p)
            mstore(add(work, 0x140), sub(entries, 1))
        }
    }

    /// Adds (x, y) to the compressed point in storage slot `slot` (BN254.compress and
    /// BN254.decompress, written out here: this runs six times per transfer), in the memory of
    /// `_workspace`. The stored sum's y is the first of these that is a root: the submitter's hint
    /// (the calldata word at `hintAt`, D70), the table of roots' entry at its slot; a root being
    /// a y < p with y² = x³ + 3 and the stored parity, which only the right y satisfies (x and
    /// the parity fix the point), so a stale hint or an entry another slot overwrote costs a
    /// modexp, never a wrong point. Failing both, the modexp precompile (0x05) gives
    /// y = ±(x³ + 3)^((p+1)/4). The new sum's y goes into the table for a later item of the batch.
    /// Reverts with `InvalidPoint` when (x, y) is not a valid point.
    function _addInto(uint256 slot, uint256 x, uint256 y, uint256 hintAt, uint256 work) private {
        bool success = true;
        uint256 p = BN254.P;
        assembly ("memory-safe") {
            let word := sload(slot)
            let sumX := and(word, sub(shl(255, 1), 1))
            let sumY := 0
            let entry := add(add(work, 0x160), shl(5, and(slot, mload(add(work, 0x140)))))
            // 0 is the identity, (0, 0), stored as such; no other point has x = 0.
            if word {
                let square := addmod(mulmod(mulmod(sumX, sumX, p), sumX, p), 3, p)
                let parity := shr(255, word)
                function isRoot(candidate, square_, parity_, p_) -> ok {
                    ok := and(and(lt(candidate, p_), eq(and(candidate, 1), parity_)), eq(mulmod(candidate, candidate, p_), square_))
                }
                sumY := calldataload(hintAt)
                if iszero(isRoot(sumY, square, parity, p)) {
                    sumY := mload(entry)
                    if iszero(isRoot(sumY, square, parity, p)) {
                        mstore(add(work, 0x60), square)
                        // All the gas: the price differs between forks (EIP-2565, EIP-7883), and
                        // the input is fixed-size and valid, so only running out of gas can fail it.
                        success := staticcall(gas(), 0x05, work, 0xc0, add(work, 0xe0), 0x20)
                        sumY := mload(add(work, 0xe0))
                        // No point has y = 0 (G1 has odd order), so p − y < p.
                        if xor(and(sumY, 1), parity) { sumY := sub(p, sumY) }
                    }
                }
            }
            mstore(add(work, 0xc0), sumX)
            mstore(add(work, 0xe0), sumY)
            mstore(add(work, 0x100), x)
            mstore(add(work, 0x120), y)
            success := and(success, staticcall(150, 0x06, add(work, 0xc0), 0x80, add(work, 0xc0), 0x40))
            sumX := mload(add(work, 0xc0))
            sumY := mload(add(work, 0xe0))
            sstore(slot, or(sumX, shl(255, sumY)))
            mstore(entry, sumY)
        }
        if (!success) revert BN254.InvalidPoint();
    }

    /// The length of a batch's table of square roots: a power of two with room for sixteen entries
    /// per item (each item writes six sums), so two parties' points seldom share an entry.
    function _rootTableLength(uint256 count) private pure returns (uint256 length) {
        length = 16;
        while (length < count * 16) length <<= 1;
    }

    // ---------------------------------------------------------------- signatures

    /// The guardian's attestation and the sender's authorisation, both over `digest`: the same
    /// typed data, so the sender signs exactly what the guardian attested. A zero `from` is
    /// refused (ecrecover's failure value must never pass for an account).
    function _requireBothSignatures(
        bytes32 digest,
        address from,
        bytes calldata guardianSignature,
        bytes calldata accountSignature
    ) private view {
        if (_recover(digest, guardianSignature) != guardianSigner) revert GuardianSignatureInvalid();
        if (from == address(0) || _recover(digest, accountSignature) != from) revert AccountSignatureInvalid(from);
    }

    function _requireGuardianSignature(bytes32 structHash, bytes calldata signature) private view {
        // guardianSigner is never zero, so a failed ecrecover (zero) never matches it.
        if (_recover(_hashTypedData(structHash), signature) != guardianSigner) revert GuardianSignatureInvalid();
    }

    /// ecrecover over a 65-byte r || s || v signature, refusing high-s (malleable) signatures
    /// and any v other than 27 or 28. Returns zero when recovery fails.
    function _recover(bytes32 digest, bytes calldata signature) private pure returns (address) {
        if (signature.length != SIGNATURE_LENGTH) revert SignatureMalformed();
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > SECP256K1_N_HALF) revert SignatureHighS();
        if (v != 27 && v != 28) revert SignatureMalformed();
        return ecrecover(digest, v, r, s);
    }

    /// `_recover` for batch items: a malformed or high-s signature gives zero instead of a
    /// revert, so it skips its item rather than the whole batch.
    function _recoverOrZero(bytes32 digest, bytes calldata signature) private pure returns (address) {
        if (signature.length != SIGNATURE_LENGTH) return address(0);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > SECP256K1_N_HALF || (v != 27 && v != 28)) return address(0);
        return ecrecover(digest, v, bytes32(signature[0:32]), s);
    }

    function _hashTypedData(bytes32 structHash) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", domainSeparator(), structHash));
    }

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(
            abi.encode(DOMAIN_TYPEHASH, keccak256(bytes(NAME)), keccak256(bytes(VERSION)), block.chainid, address(this))
        );
    }

    // ---------------------------------------------------------------- views

    /// The EIP-712 domain separator; recomputed if the chain id changed since deployment (a fork).
    function domainSeparator() public view returns (bytes32) {
        return block.chainid == cachedChainId ? cachedDomainSeparator : _buildDomainSeparator();
    }

    /// EIP-5267: the EIP-712 domain, for wallets and for viem's getEip712Domain.
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        return (hex"0f", NAME, VERSION, block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    function guardianEncryptionKey() external view returns (Point memory) {
        return guardianKey;
    }

    /// The pending rotation, or all zeros when none is (a lapsed one is still reported until it
    /// is replaced or cancelled: compare `expiresAt` with the chain's time).
    function pendingGuardianRotation() external view returns (GuardianRotation memory) {
        return pendingRotation;
    }

    /// The registered encryption key of `account`, or the identity (0, 0) when none is.
    function encryptionKeyOf(address account) external view returns (Point memory) {
        return encryptionKeys[account];
    }

    function isRegistered(address account) external view returns (bool) {
        Point storage key = encryptionKeys[account];
        return key.x != 0 || key.y != 0;
    }

    function encryptedBalanceOf(address account) external view returns (EncryptedBalance memory) {
        return _expand(balances[account]);
    }

    /// `encryptedBalanceOf` for many accounts in one call: what a relayer reads to hint the
    /// stored points' roots to `confidentialTransferBatch` (D70).
    function encryptedBalancesOf(address[] calldata accounts) external view returns (EncryptedBalance[] memory out) {
        out = new EncryptedBalance[](accounts.length);
        for (uint256 i; i < accounts.length; ++i) {
            out[i] = _expand(balances[accounts[i]]);
        }
    }

    function isNonceUsed(address sender, uint256 nonce) external view returns (bool) {
        return nonceBitmap[sender][nonce >> 8] & (1 << (nonce & 0xff)) != 0;
    }

    /// The generator H, exposed so off-chain code can check it against the derivation rule.
    function generatorH() external pure returns (Point memory) {
        return Point(BN254.H_X, BN254.H_Y);
    }
}
