// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @notice Test-only USDC stand-in: 6 decimals, EIP-2612 permit and EIP-3009 transfer by authorization (as
/// USDC's FiatTokenV2_2: same functions, events and type hashes, signed in the permit's EIP-712 domain, by
/// an EOA or an ERC-1271 smart wallet), and
/// a mint anyone may call. Deployed only on local and test chains by the dev stack; never configured on
/// a live chain.
contract TestUSDC is ERC20, ERC20Permit {
    /// @dev USDC's type hashes. Private (USDC exposes them): every public function lengthens the selector
    /// dispatch that the escrow's charges pay on each call to this token in the gas benchmark.
    bytes32 private constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 private constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 private constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");
    bytes32 private constant CANCEL_AUTHORIZATION_TYPEHASH =
        keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");

    /// @dev True once an authorization's nonce was used or canceled (nonces are random, not sequential).
    mapping(address authorizer => mapping(bytes32 nonce => bool)) private _authorizationStates;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);

    error AuthorizationNotYetValid(uint256 validAfter);
    error AuthorizationExpired(uint256 validBefore);
    error AuthorizationUsedOrCanceled(address authorizer, bytes32 nonce);
    error InvalidAuthorizationSignature();
    error CallerNotPayee();

    constructor() ERC20("Test USD Coin", "USDC") ERC20Permit("Test USD Coin") {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice EIP-2612 as USDC has it since v2.2: an ERC-1271 wallet's signature is accepted too, so a
    /// contract wallet can grant an allowance without sending a transaction.
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        public
        override
    {
        if (block.timestamp > deadline) revert ERC2612ExpiredSignature(deadline);
        bytes32 digest = _hashTypedDataV4(
            keccak256(abi.encode(PERMIT_TYPEHASH, owner, spender, value, _useNonce(owner), deadline))
        );
        if (!SignatureChecker.isValidSignatureNow(owner, digest, abi.encodePacked(r, s, v))) {
            revert InvalidAuthorizationSignature();
        }
        _approve(owner, spender, value);
    }

    /// @notice Moves `value` from `from` to `to` on `from`'s signature; anyone may submit it, so `from`
    /// needs no gas. Valid strictly after `validAfter` and strictly before `validBefore`, once.
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _useAuthorization(
            from,
            keccak256(abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)),
            validAfter,
            validBefore,
            nonce,
            v,
            r,
            s
        );
        _transfer(from, to, value);
    }

    /// @notice The same, but only the payee `to` may submit it (so a front-runner cannot use the
    /// authorization outside the payee's own call).
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        if (msg.sender != to) revert CallerNotPayee();
        _useAuthorization(
            from,
            keccak256(abi.encode(RECEIVE_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)),
            validAfter,
            validBefore,
            nonce,
            v,
            r,
            s
        );
        _transfer(from, to, value);
    }

    /// @notice Burns an unused authorization's nonce on the authorizer's signature.
    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        if (_authorizationStates[authorizer][nonce]) revert AuthorizationUsedOrCanceled(authorizer, nonce);
        _checkSignature(authorizer, keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce)), v, r, s);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    /// @notice Whether `authorizer`'s `nonce` was used or canceled.
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

    function _useAuthorization(
        address authorizer,
        bytes32 structHash,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) private {
        if (block.timestamp <= validAfter) revert AuthorizationNotYetValid(validAfter);
        if (block.timestamp >= validBefore) revert AuthorizationExpired(validBefore);
        if (_authorizationStates[authorizer][nonce]) revert AuthorizationUsedOrCanceled(authorizer, nonce);
        _checkSignature(authorizer, structHash, v, r, s);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationUsed(authorizer, nonce);
    }

    /// @dev An EOA's ECDSA signature (malleable ones refused) or an ERC-1271 wallet's, packed (r, s, v)
    /// as USDC passes it on.
    function _checkSignature(address signer, bytes32 structHash, uint8 v, bytes32 r, bytes32 s) private view {
        if (!SignatureChecker.isValidSignatureNow(signer, _hashTypedDataV4(structHash), abi.encodePacked(r, s, v))) {
            revert InvalidAuthorizationSignature();
        }
    }
}
