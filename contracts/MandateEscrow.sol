// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {DepositCollector} from "./DepositCollector.sol";
import {MonthlyPeriods} from "./MonthlyPeriods.sol";

/// @title MandateEscrow
/// @notice A customer signs a mandate once (EIP-712, from an EOA or an ERC-1271 smart wallet); its operator
/// may then collect at most `cap` per calendar month, and at most `cap * approvalPeriods` per signature,
/// from the customer's own wallet (an ERC-20 allowance), paid to the `payee` fixed by the signature.
/// With a hold, charged funds wait here until released to the payee or returned to the customer.
/// One-time payments arrive at deposit addresses (CREATE2 clones of a collector that only this contract
/// can empty) by plain ERC-20 transfers; a sweep moves them to the payee, or into a hold like a charge's.
/// An operator may name relayers that act for it (`setRelayer`): the operator can be a cold key or a Safe
/// while hot relayer keys send the transactions, and rotating a relayer key needs no customer to sign
/// again. A relayer can do exactly what its operator can, and nothing else.
/// There is no owner, no admin, no upgrade path, and no function that moves funds anywhere else.
/// Tokens must be standard ERC-20s (no fee on transfer, no rebasing); tokens without return values are fine.
contract MandateEscrow is EIP712, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice What the customer signs. `mandateId`'s upper 160 bits are the customer's address, so each
    /// customer has a namespace of its own and nobody can take another customer's id.
    struct Terms {
        bytes32 mandateId;
        address payee;
        address token;
        uint256 cap;
        uint64 anchor;
        uint32 approvalPeriods;
        address operator;
        uint64 holdSeconds;
        uint64 nonce;
        uint64 deadline;
    }

    bytes32 public constant TERMS_TYPEHASH = keccak256(
        "Terms(bytes32 mandateId,address payee,address token,uint256 cap,uint64 anchor,uint32 approvalPeriods,address operator,uint64 holdSeconds,uint64 nonce,uint64 deadline)"
    );

    /// @notice What a customer signs to revoke a mandate without sending a transaction (`revokeWithSignature`).
    bytes32 public constant REVOKE_TYPEHASH = keccak256("Revoke(bytes32 mandateId,uint64 deadline)");

    /// @notice What an operator signs to name or remove a relayer without sending a transaction
    /// (`setRelayerWithSignature`); `nonce` is the operator's `relayerNonce`, used once, in order.
    bytes32 public constant SET_RELAYER_TYPEHASH =
        keccak256("SetRelayer(address relayer,bool allowed,uint64 nonce,uint64 deadline)");

    /// @notice A mandate as `mandate()` returns it.
    struct Mandate {
        address payee;
        uint64 anchor;
        uint32 approvalPeriods;
        address token;
        uint64 holdSeconds;
        bool revoked;
        address operator;
        uint64 nonce;
        uint96 cap;
        uint128 approvalLeft;
        uint32 chargedPeriodPlusOne;
    }

    /// @dev A mandate in storage: five slots laid out for the charge and the release. A charge reads the
    /// first four and writes the second (and, with a hold, the third and fourth); a release reads the third
    /// and fourth and writes the third; the fifth only `authorize`, `lowerCap` and the view touch. The hold
    /// of the mandate's latest held charge lives in the third and fourth slots, rewritten non-zero to non-zero
    /// each period instead of a fresh slot per charge (22,100 gas). A charge with a hold that finds the
    /// previous one still open (a hold longer than a period, or not yet released) first moves it to
    /// `_holds`, where it stays releasable and returnable as before.
    struct Record {
        // slot 0: who may charge, and when
        address operator;
        uint40 anchor;
        uint48 holdSeconds;
        bool revoked;
        // slot 1: what is left, written by every charge
        uint96 cap;
        uint128 approvalLeft;
        uint32 chargedPeriodPlusOne;
        // slot 2: where funds go, and the open hold's amount (0: none)
        address payee;
        uint96 heldAmount;
        // slot 3: the token, and the open hold's end and period
        address token;
        uint64 heldReleaseAt;
        uint32 heldPeriod;
        // slot 4
        uint64 nonce;
        uint32 approvalPeriods;
    }

    struct Hold {
        uint128 amount;
        uint64 releaseAt;
    }

    /// @notice An EIP-2612 permit that comes with one authorisation of `authorizeMany`; `deadline` 0: none.
    struct Permit {
        uint256 value;
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    /// @notice What a payment's deposit address is bound to. The address is a CREATE2 clone whose salt
    /// is `keccak256(abi.encode(deposit))`, so every field is fixed before anyone pays.
    struct Deposit {
        bytes32 paymentId;
        address payee;
        address token;
        /// @dev May return a held payment to its payer (with the payee), like a charge's operator.
        address operator;
        uint64 holdSeconds;
    }

    mapping(bytes32 mandateId => Record) private _mandates;
    /// @dev Holds moved out of their mandate's record by a later held charge (see `Record`).
    mapping(bytes32 chargeId => Hold) private _holds;
    mapping(bytes32 depositKey => Hold) private _paymentHolds;
    /// @notice Whether `relayer` may act for `operator` (charge, lower a cap, return a charge or a payment).
    mapping(address operator => mapping(address relayer => bool)) public isRelayer;
    /// @notice The nonce an operator's next `SetRelayer` signature must carry.
    mapping(address operator => uint64) public relayerNonce;

    /// @notice The code every deposit address runs (deployed by this contract's constructor).
    address public immutable collector;

    event MandateAuthorized(
        bytes32 indexed mandateId,
        address indexed customer,
        address indexed payee,
        address token,
        uint256 cap,
        uint64 anchor,
        uint32 approvalPeriods,
        address operator,
        uint64 holdSeconds,
        uint64 nonce,
        uint256 approval
    );
    /// @notice An authorisation of `authorizeMany` that was not recorded; `reason` is the selector of the
    /// error `authorize` would have reverted with (`StaleNonce`, `SignatureExpired`, `PermitFailed`, ...).
    event AuthorizationSkipped(bytes32 indexed mandateId, uint64 nonce, bytes4 reason);
    event MandateRevoked(bytes32 indexed mandateId, address indexed customer);
    /// @notice `relayer` may (`allowed`) or may no longer act for `operator`.
    event RelayerSet(address indexed operator, address indexed relayer, bool allowed);
    /// @notice `lowerCap`: the cap went from `previousCap` down to `cap`, and the approval left is now
    /// `approvalLeft` (at most `cap * approvalPeriods`); `by` is the operator or the payee that lowered it.
    event CapLowered(bytes32 indexed mandateId, uint256 previousCap, uint256 cap, uint256 approvalLeft, address by);
    /// @param releaseAt 0 when the charge went straight to the payee (no hold).
    event Charged(
        bytes32 indexed mandateId,
        bytes32 indexed chargeId,
        uint32 period,
        uint256 amount,
        address customer,
        address payee,
        address token,
        uint64 releaseAt,
        uint256 approvalLeft
    );
    event Released(bytes32 indexed mandateId, bytes32 indexed chargeId, uint32 period, uint256 amount, address payee);
    event Returned(bytes32 indexed mandateId, bytes32 indexed chargeId, uint32 period, uint256 amount, address customer);
    /// @param releaseAt 0 when the payment went straight to the payee; otherwise when all of the
    /// payment's held funds (`held`, this sweep included) may be released (a top-up keeps the open
    /// hold's time).
    event PaymentReceived(
        bytes32 indexed paymentId,
        address indexed payee,
        address indexed depositAddress,
        address token,
        uint256 amount,
        uint64 releaseAt,
        uint256 held
    );
    event PaymentReleased(
        bytes32 indexed paymentId, address indexed payee, address indexed depositAddress, address token, uint256 amount
    );
    event PaymentReturned(
        bytes32 indexed paymentId,
        address indexed payee,
        address indexed depositAddress,
        address token,
        uint256 amount,
        address to
    );

    error InvalidTerms();
    error InvalidSignature();
    error SignatureExpired(uint64 deadline);
    error StaleNonce(uint64 nonce, uint64 current);
    error TermsMismatch();
    error PermitFailed();
    error UnknownMandate(bytes32 mandateId);
    error NotCustomer();
    error NotOperator();
    error Revoked(bytes32 mandateId);
    error MandateNotStarted(uint64 anchor);
    error CapExceeded(uint256 amount, uint256 cap);
    error CapNotLowered(uint256 cap, uint256 current);
    error PeriodAlreadyCharged(uint32 period);
    error ApprovalExhausted(uint256 amount, uint256 approvalLeft);
    error InsufficientBalance(uint256 amount, uint256 balance);
    error InsufficientAllowance(uint256 amount, uint256 allowance);
    error NoHold(bytes32 chargeId);
    error HoldNotOver(uint64 releaseAt);
    error HoldOver(uint64 releaseAt);
    error LengthMismatch();

    constructor() EIP712("MandateEscrow", "1") {
        collector = address(new DepositCollector());
    }

    // ---------------------------------------------------------------- authorization

    /// @notice Records the customer's signature: a new mandate, or a re-signature of an existing one
    /// (higher nonce, same customer, payee, token and anchor) that restores the approval to cap * approvalPeriods.
    /// Anyone may submit it, so the customer needs no gas.
    function authorize(Terms calldata terms, bytes calldata signature) external nonReentrant {
        _authorize(terms, signature);
    }

    /// @notice `authorize` plus an EIP-2612 permit for the allowance: gasless for the customer end to end.
    /// A permit that was front-run (nonce used) is accepted when the allowance it set is in place.
    function authorizeWithPermit(
        Terms calldata terms,
        bytes calldata signature,
        uint256 permitValue,
        uint256 permitDeadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external nonReentrant {
        _authorize(terms, signature);
        if (!_permit(terms, Permit(permitValue, permitDeadline, v, r, s))) revert PermitFailed();
    }

    /// @notice Several customers' authorisations in one transaction (the relayer's batches), each with its
    /// own checks, permit and `MandateAuthorized` event. An item that `authorize` would refuse is skipped
    /// with `AuthorizationSkipped` and the others stand: the items are independent customers' signatures,
    /// and anyone can submit one of them first (which makes it stale here), so one item must not be able
    /// to undo the rest. Items apply in order: two signatures of one mandate see each other.
    function authorizeMany(Terms[] calldata terms, bytes[] calldata signatures, Permit[] calldata permits)
        external
        nonReentrant
    {
        if (terms.length != signatures.length || terms.length != permits.length) revert LengthMismatch();
        for (uint256 i; i < terms.length; ++i) {
            Terms calldata t = terms[i];
            (bytes4 refusal, bool isNew, Record storage m) = _check(t, signatures[i], true);
            // The permit is tried only for terms that will be recorded, and before they are.
            if (refusal == 0 && permits[i].deadline != 0 && !_permit(t, permits[i])) {
                refusal = PermitFailed.selector;
            }
            if (refusal == 0) _record(t, isNew, m);
            else emit AuthorizationSkipped(t.mandateId, t.nonce, refusal);
        }
    }

    /// @dev Applies the customer's permit; one that was front-run (nonce used) counts when the allowance
    /// it set is in place.
    function _permit(Terms calldata t, Permit memory p) private returns (bool) {
        address customer = customerOf(t.mandateId);
        try IERC20Permit(t.token).permit(customer, address(this), p.value, p.deadline, p.v, p.r, p.s) {
            return true;
        } catch {
            return IERC20(t.token).allowance(customer, address(this)) >= p.value;
        }
    }

    /// @notice The customer ends the mandate for good. Charges already held are still released or returned.
    function revoke(bytes32 mandateId) external {
        Record storage m = _mandates[mandateId];
        if (m.operator == address(0)) revert UnknownMandate(mandateId);
        if (msg.sender != customerOf(mandateId)) revert NotCustomer();
        if (m.revoked) revert Revoked(mandateId);
        m.revoked = true;
        emit MandateRevoked(mandateId, msg.sender);
    }

    /// @notice `revoke` by the customer's EIP-712 signature of `Revoke(mandateId, deadline)` (an EOA's, or an
    /// ERC-1271 wallet's), submitted by anyone: the customer needs no gas. A revocation is final, so a
    /// signature submitted again (or after anyone submitted it first) only reverts with `Revoked`; the
    /// domain binds it to this chain and this contract.
    function revokeWithSignature(bytes32 mandateId, uint64 deadline, bytes calldata signature) external {
        Record storage m = _mandates[mandateId];
        if (m.operator == address(0)) revert UnknownMandate(mandateId);
        if (block.timestamp > deadline) revert SignatureExpired(deadline);
        if (m.revoked) revert Revoked(mandateId);
        address customer = customerOf(mandateId);
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(REVOKE_TYPEHASH, mandateId, deadline)));
        if (!SignatureChecker.isValidSignatureNow(customer, digest, signature)) revert InvalidSignature();
        m.revoked = true;
        emit MandateRevoked(mandateId, customer);
    }

    /// @notice Lowers a mandate's cap at once: the operator, on the merchant's behalf, or the payee itself.
    /// It only narrows what the customer signed: the new cap is below the current one (and above 0), payee,
    /// token, anchor and nonce stay, and the approval left becomes at most `newCap * approvalPeriods`, what
    /// the customer's latest signature approves at the lower cap. Raising a cap takes a new signature.
    function lowerCap(bytes32 mandateId, uint256 newCap) external {
        Record storage m = _mandates[mandateId];
        if (m.operator == address(0)) revert UnknownMandate(mandateId);
        if (!_actsFor(m.operator) && msg.sender != m.payee) revert NotOperator();
        if (m.revoked) revert Revoked(mandateId);
        uint256 cap = m.cap;
        if (newCap == 0 || newCap >= cap) revert CapNotLowered(newCap, cap);
        // newCap < 2^96 and approvalPeriods < 2^32: the limit fits in 128 bits.
        uint128 limit = uint128(newCap) * m.approvalPeriods;
        uint128 left = m.approvalLeft;
        if (left > limit) left = limit;
        m.cap = uint96(newCap);
        m.approvalLeft = left;
        emit CapLowered(mandateId, cap, newCap, left, msg.sender);
    }

    function _authorize(Terms calldata t, bytes calldata signature) private {
        (, bool isNew, Record storage m) = _check(t, signature, false);
        _record(t, isNew, m);
    }

    /// @dev Whether the signed terms can be recorded, and whether they open a new mandate. Refused terms
    /// revert with the error, or with `skip` return its selector (0: accepted). Writes nothing.
    function _check(Terms calldata t, bytes calldata signature, bool skip)
        private
        view
        returns (bytes4 refusal, bool isNew, Record storage m)
    {
        m = _mandates[t.mandateId];
        if (block.timestamp > t.deadline) {
            if (skip) return (SignatureExpired.selector, false, m);
            revert SignatureExpired(t.deadline);
        }
        address customer = customerOf(t.mandateId);
        if (
            customer == address(0) || t.payee == address(0) || t.token == address(0) || t.operator == address(0)
                || t.cap == 0 || t.cap > type(uint96).max || t.approvalPeriods == 0 || t.anchor > type(uint40).max
                || t.holdSeconds > type(uint48).max
        ) {
            if (skip) return (InvalidTerms.selector, false, m);
            revert InvalidTerms();
        }
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(TERMS_TYPEHASH, t)));
        if (!SignatureChecker.isValidSignatureNow(customer, digest, signature)) {
            if (skip) return (InvalidSignature.selector, false, m);
            revert InvalidSignature();
        }
        isNew = m.operator == address(0);
        if (!isNew) {
            if (m.revoked) {
                if (skip) return (Revoked.selector, false, m);
                revert Revoked(t.mandateId);
            }
            if (t.payee != m.payee || t.token != m.token || t.anchor != m.anchor) {
                if (skip) return (TermsMismatch.selector, false, m);
                revert TermsMismatch();
            }
        }
        if (t.nonce <= m.nonce) {
            if (skip) return (StaleNonce.selector, false, m);
            revert StaleNonce(t.nonce, m.nonce);
        }
    }

    /// @dev Records terms `_check` accepted and emits `MandateAuthorized`.
    function _record(Terms calldata t, bool isNew, Record storage m) private {
        uint128 approval = uint128(t.cap) * t.approvalPeriods;
        // Slot by slot, so that the optimizer writes each packed slot once.
        if (isNew) m.anchor = uint40(t.anchor);
        m.holdSeconds = uint48(t.holdSeconds);
        m.operator = t.operator;
        m.cap = uint96(t.cap);
        m.approvalLeft = approval;
        if (isNew) {
            m.payee = t.payee;
            m.token = t.token;
        }
        m.nonce = t.nonce;
        m.approvalPeriods = t.approvalPeriods;
        emit MandateAuthorized(
            t.mandateId,
            customerOf(t.mandateId),
            t.payee,
            t.token,
            t.cap,
            t.anchor,
            t.approvalPeriods,
            t.operator,
            t.holdSeconds,
            t.nonce,
            approval
        );
    }

    // ---------------------------------------------------------------- relayers

    /// @notice Names (`allowed`) or removes a relayer that acts for the caller, as the caller's operator.
    function setRelayer(address relayer, bool allowed) external {
        _setRelayer(msg.sender, relayer, allowed);
    }

    /// @notice `setRelayer` by the operator's EIP-712 signature of `SetRelayer(relayer, allowed, nonce,
    /// deadline)` (an EOA's, or an ERC-1271 wallet's such as a Safe's), submitted by anyone: the operator's
    /// key can stay offline and needs no gas. Signatures apply once each, in nonce order.
    function setRelayerWithSignature(
        address operator,
        address relayer,
        bool allowed,
        uint64 nonce,
        uint64 deadline,
        bytes calldata signature
    ) external {
        if (block.timestamp > deadline) revert SignatureExpired(deadline);
        uint64 current = relayerNonce[operator];
        if (nonce != current) revert StaleNonce(nonce, current);
        bytes32 digest =
            _hashTypedDataV4(keccak256(abi.encode(SET_RELAYER_TYPEHASH, relayer, allowed, nonce, deadline)));
        if (operator == address(0) || !SignatureChecker.isValidSignatureNow(operator, digest, signature)) {
            revert InvalidSignature();
        }
        relayerNonce[operator] = current + 1;
        _setRelayer(operator, relayer, allowed);
    }

    function _setRelayer(address operator, address relayer, bool allowed) private {
        if (relayer == address(0)) revert InvalidTerms();
        isRelayer[operator][relayer] = allowed;
        emit RelayerSet(operator, relayer, allowed);
    }

    /// @dev Whether the caller is `operator` or one of its relayers. The operator itself is checked first,
    /// so a mandate whose operator sends its own transactions pays nothing for relayers.
    function _actsFor(address operator) private view returns (bool) {
        return msg.sender == operator || isRelayer[operator][msg.sender];
    }

    // ---------------------------------------------------------------- charges

    /// @notice Collects `amount` for the current period. Operator only.
    function charge(bytes32 mandateId, uint256 amount) external nonReentrant returns (bytes32 chargeId) {
        (chargeId,) = _charge(mandateId, amount, address(0));
    }

    /// @notice Several charges in one transaction; all succeed or none does.
    function chargeMany(bytes32[] calldata mandateIds, uint256[] calldata amounts) external nonReentrant {
        if (mandateIds.length != amounts.length) revert LengthMismatch();
        // The operator the caller was last found to act for: a batch of one operator's mandates checks
        // the caller's relayer standing once.
        address actsFor;
        for (uint256 i; i < mandateIds.length; ++i) {
            (, actsFor) = _charge(mandateIds[i], amounts[i], actsFor);
        }
    }

    /// @dev `actsFor`: an operator the caller is known to act for (or 0); returns the mandate's operator.
    function _charge(bytes32 id, uint256 amount, address actsFor)
        private
        returns (bytes32 chargeId, address operator)
    {
        Record storage m = _mandates[id];
        operator = m.operator;
        if (operator == address(0)) revert UnknownMandate(id);
        if (operator != actsFor && !_actsFor(operator)) revert NotOperator();
        if (m.revoked) revert Revoked(id);
        uint256 cap = m.cap;
        if (amount == 0 || amount > cap) revert CapExceeded(amount, cap);
        uint64 anchor = m.anchor;
        if (block.timestamp < anchor) revert MandateNotStarted(anchor);
        uint32 period = uint32(MonthlyPeriods.periodIndexAt(anchor, block.timestamp));
        if (m.chargedPeriodPlusOne > period) revert PeriodAlreadyCharged(period);
        uint128 left = m.approvalLeft;
        if (amount > left) revert ApprovalExhausted(amount, left);

        unchecked {
            left -= uint128(amount);
        }
        m.approvalLeft = left;
        m.chargedPeriodPlusOne = period + 1;
        chargeId = chargeIdOf(id, period);
        address customer = customerOf(id);
        IERC20 token = IERC20(m.token);
        address payee = m.payee;
        uint64 holdSeconds = m.holdSeconds;
        uint64 releaseAt;
        if (holdSeconds == 0) {
            _pull(token, customer, payee, amount);
        } else {
            uint96 open = m.heldAmount;
            if (open != 0) _holds[chargeIdOf(id, m.heldPeriod)] = Hold(open, m.heldReleaseAt);
            releaseAt = uint64(block.timestamp) + holdSeconds;
            m.heldAmount = uint96(amount);
            m.heldReleaseAt = releaseAt;
            m.heldPeriod = period;
            _pull(token, customer, address(this), amount);
        }
        emit Charged(id, chargeId, period, amount, customer, payee, address(token), releaseAt, left);
    }

    /// @dev Pulls a charge from the customer's wallet. The balance and allowance are read only when the
    /// transfer failed, to name the reason (`InsufficientBalance`, `InsufficientAllowance`: the service
    /// tells the merchant which); checking them first cost two calls to the token on every charge. Any
    /// other failure is repeated with the token's own revert reason.
    function _pull(IERC20 token, address customer, address to, uint256 amount) private {
        if (token.trySafeTransferFrom(customer, to, amount)) return;
        uint256 balance = token.balanceOf(customer);
        if (balance < amount) revert InsufficientBalance(amount, balance);
        uint256 allowance = token.allowance(customer, address(this));
        if (allowance < amount) revert InsufficientAllowance(amount, allowance);
        token.safeTransferFrom(customer, to, amount);
    }

    // ---------------------------------------------------------------- holds

    /// @notice Pays a held charge to the payee once its hold is over. Anyone may call.
    function release(bytes32 mandateId, uint32 period) external nonReentrant {
        (IERC20 token, address payee, uint256 amount) = _release(mandateId, period);
        token.safeTransfer(payee, amount);
    }

    /// @notice Several releases in one transaction. A charge with nothing held (released or returned
    /// already, or never held) is passed over without an event: anyone may release one item of a batch
    /// first, which must not undo the rest. A hold not yet over reverts the whole batch. Consecutive
    /// releases to the same payee in the same token are paid in one transfer (each still has its own
    /// `Released` event).
    function releaseMany(bytes32[] calldata mandateIds, uint32[] calldata periods) external nonReentrant {
        if (mandateIds.length != periods.length) revert LengthMismatch();
        IERC20 token;
        address payee;
        uint256 owed;
        for (uint256 i; i < mandateIds.length; ++i) {
            // `_release`, passing over a charge with nothing held (here: through `_release`, about 90 gas more
            // per release, from the optimizer's stack layout).
            bytes32 id = mandateIds[i];
            uint32 period = periods[i];
            Record storage m = _mandates[id];
            uint256 amount = _takeHold(m, id, period, true, true);
            if (amount == 0) continue;
            address p = m.payee;
            IERC20 t = IERC20(m.token);
            emit Released(id, chargeIdOf(id, period), period, amount, p);
            if (t != token || p != payee) {
                if (owed != 0) token.safeTransfer(payee, owed);
                (token, payee, owed) = (t, p, 0);
            }
            owed += amount;
        }
        if (owed != 0) token.safeTransfer(payee, owed);
    }

    /// @notice Gives a held charge back to the customer while the hold lasts: the operator, on the
    /// merchant's behalf, or the payee itself.
    function returnCharge(bytes32 mandateId, uint32 period) external nonReentrant {
        Record storage m = _mandates[mandateId];
        if (!_actsFor(m.operator) && msg.sender != m.payee) revert NotOperator();
        uint256 amount = _takeHold(m, mandateId, period, false, false);
        address customer = customerOf(mandateId);
        IERC20(m.token).safeTransfer(customer, amount);
        emit Returned(mandateId, chargeIdOf(mandateId, period), period, amount, customer);
    }

    /// @dev Ends a hold for release; the caller pays `amount` of `token` to `payee`.
    function _release(bytes32 id, uint32 period) private returns (IERC20 token, address payee, uint256 amount) {
        Record storage m = _mandates[id];
        amount = _takeHold(m, id, period, true, false);
        payee = m.payee;
        token = IERC20(m.token);
        emit Released(id, chargeIdOf(id, period), period, amount, payee);
    }

    /// @dev Ends a charge's hold and returns its amount: the record's open hold when it is this period's,
    /// else one moved to `_holds`. A release needs the hold over, a return needs it still running. Nothing
    /// held: `NoHold`, or with `skip` 0.
    function _takeHold(Record storage m, bytes32 id, uint32 period, bool release, bool skip)
        private
        returns (uint256 amount)
    {
        uint64 releaseAt;
        amount = m.heldAmount;
        if (amount != 0 && m.heldPeriod == period) {
            releaseAt = m.heldReleaseAt;
            m.heldAmount = 0;
        } else {
            bytes32 chargeId = chargeIdOf(id, period);
            Hold memory h = _holds[chargeId];
            if (h.amount == 0) {
                if (!skip) revert NoHold(chargeId);
                return 0;
            }
            (amount, releaseAt) = (h.amount, h.releaseAt);
            delete _holds[chargeId];
        }
        if (release) {
            if (block.timestamp < releaseAt) revert HoldNotOver(releaseAt);
        } else if (block.timestamp >= releaseAt) {
            revert HoldOver(releaseAt);
        }
    }

    // ---------------------------------------------------------------- one-time payments

    /// @notice Moves whatever each deposit address holds of its token to the payee, or into the
    /// payment's hold (`holdSeconds` from this sweep; funds swept while a hold is open join it and are
    /// released with it). A deposit
    /// address holding nothing is passed over; its first non-empty sweep deploys its clone. Anyone may
    /// call: the funds can only go where the terms say.
    function sweep(Deposit[] calldata deposits) external nonReentrant {
        for (uint256 i; i < deposits.length; ++i) {
            _sweep(deposits[i]);
        }
    }

    /// @notice Pays each payment's held funds to its payee once its hold is over. Anyone may call. A payment
    /// with nothing held (released or returned already, or never held) is passed over without an event, as
    /// `releaseMany` passes over charges; a hold not yet over reverts the whole batch.
    function releasePayments(Deposit[] calldata deposits) external nonReentrant {
        for (uint256 i; i < deposits.length; ++i) {
            Deposit calldata d = deposits[i];
            bytes32 key = depositKey(d);
            Hold memory h = _paymentHolds[key];
            if (h.amount == 0) continue;
            if (block.timestamp < h.releaseAt) revert HoldNotOver(h.releaseAt);
            delete _paymentHolds[key];
            IERC20(d.token).safeTransfer(d.payee, h.amount);
            emit PaymentReleased(d.paymentId, d.payee, _depositAddress(key), d.token, h.amount);
        }
    }

    /// @notice Gives a payment's held funds back while its hold lasts: the operator, on the merchant's
    /// behalf, or the payee itself, to the payer's address `to` (a plain transfer does not tell the
    /// chain who paid, so the caller names it).
    function returnPayment(Deposit calldata d, address to) external nonReentrant {
        if (!_actsFor(d.operator) && msg.sender != d.payee) revert NotOperator();
        if (to == address(0)) revert InvalidTerms();
        bytes32 key = depositKey(d);
        Hold memory h = _paymentHolds[key];
        if (h.amount == 0) revert NoHold(key);
        if (block.timestamp >= h.releaseAt) revert HoldOver(h.releaseAt);
        delete _paymentHolds[key];
        IERC20(d.token).safeTransfer(to, h.amount);
        emit PaymentReturned(d.paymentId, d.payee, _depositAddress(key), d.token, h.amount, to);
    }

    function _sweep(Deposit calldata d) private {
        if (d.payee == address(0) || d.token == address(0) || d.operator == address(0)) revert InvalidTerms();
        bytes32 key = depositKey(d);
        address deposit = _depositAddress(key);
        IERC20 token = IERC20(d.token);
        uint256 amount = token.balanceOf(deposit);
        if (amount == 0) return;
        if (deposit.code.length == 0) Clones.cloneDeterministic(collector, key);
        uint64 releaseAt;
        uint256 held;
        if (d.holdSeconds == 0) {
            DepositCollector(deposit).collect(token, d.payee);
        } else {
            Hold storage h = _paymentHolds[key];
            held = uint256(h.amount) + amount;
            if (held > type(uint128).max) revert CapExceeded(held, type(uint128).max);
            // A top-up joins the hold in place and ends with it: were a sweep to restart the hold, anyone
            // could keep a payee from its funds for good with dust and a sweep every `holdSeconds`.
            releaseAt = h.amount == 0 ? uint64(block.timestamp) + d.holdSeconds : h.releaseAt;
            h.amount = uint128(held);
            h.releaseAt = releaseAt;
            DepositCollector(deposit).collect(token, address(this));
        }
        emit PaymentReceived(d.paymentId, d.payee, deposit, d.token, amount, releaseAt, held);
    }

    function _depositAddress(bytes32 key) private view returns (address) {
        return Clones.predictDeterministicAddress(collector, key);
    }

    // ---------------------------------------------------------------- views

    /// @notice The CREATE2 salt of a deposit address: the hash of its terms.
    function depositKey(Deposit calldata d) public pure returns (bytes32) {
        return keccak256(abi.encode(d));
    }

    /// @notice Where a payer sends a payment with these terms (nothing needs to be deployed first).
    function depositAddress(Deposit calldata d) external view returns (address) {
        return _depositAddress(depositKey(d));
    }

    /// @notice A payment's held funds and when they may be released (0, 0 when nothing is held).
    function paymentHoldOf(Deposit calldata d) external view returns (uint256 amount, uint64 releaseAt) {
        Hold memory h = _paymentHolds[depositKey(d)];
        return (h.amount, h.releaseAt);
    }


    function customerOf(bytes32 mandateId) public pure returns (address) {
        return address(uint160(uint256(mandateId) >> 96));
    }

    function chargeIdOf(bytes32 mandateId, uint32 period) public pure returns (bytes32) {
        return keccak256(abi.encode(mandateId, period));
    }

    function mandate(bytes32 mandateId) external view returns (Mandate memory) {
        Record storage m = _mandates[mandateId];
        return Mandate({
            payee: m.payee,
            anchor: m.anchor,
            approvalPeriods: m.approvalPeriods,
            token: m.token,
            holdSeconds: m.holdSeconds,
            revoked: m.revoked,
            operator: m.operator,
            nonce: m.nonce,
            cap: m.cap,
            approvalLeft: m.approvalLeft,
            chargedPeriodPlusOne: m.chargedPeriodPlusOne
        });
    }

    function approvalLeft(bytes32 mandateId) external view returns (uint256) {
        return _mandates[mandateId].approvalLeft;
    }

    /// @notice The current period of a mandate; reverts before its anchor.
    function currentPeriod(bytes32 mandateId) public view returns (uint32) {
        Record storage m = _mandates[mandateId];
        if (m.operator == address(0)) revert UnknownMandate(mandateId);
        if (block.timestamp < m.anchor) revert MandateNotStarted(m.anchor);
        return uint32(MonthlyPeriods.periodIndexAt(m.anchor, block.timestamp));
    }

    function chargedThisPeriod(bytes32 mandateId) external view returns (bool) {
        return _mandates[mandateId].chargedPeriodPlusOne > currentPeriod(mandateId);
    }

    function holdOf(bytes32 mandateId, uint32 period) external view returns (uint256 amount, uint64 releaseAt) {
        Record storage m = _mandates[mandateId];
        if (m.heldAmount != 0 && m.heldPeriod == period) return (m.heldAmount, m.heldReleaseAt);
        Hold memory h = _holds[chargeIdOf(mandateId, period)];
        return (h.amount, h.releaseAt);
    }

    function periodIndexAt(uint64 anchor, uint256 timestamp) external pure returns (uint256) {
        if (timestamp < anchor) revert MandateNotStarted(anchor);
        return MonthlyPeriods.periodIndexAt(anchor, timestamp);
    }

    function periodStart(uint64 anchor, uint256 index) external pure returns (uint256) {
        return MonthlyPeriods.periodStart(anchor, index);
    }

    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }
}
