// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @notice Test-only hostile token: on every transfer it calls back into the escrow with a call chosen by
/// the test (a second charge, a release, a return...) and records whether that reentrant call succeeded.
contract ReentrantToken is ERC20 {
    address public target;
    bytes public payload;
    bool public attempted;
    bool public reentrySucceeded;
    bytes public reentryError;

    constructor() ERC20("Reentrant Token", "REE") {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function arm(address target_, bytes calldata payload_) external {
        target = target_;
        payload = payload_;
        attempted = false;
        reentrySucceeded = false;
        reentryError = "";
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (target != address(0) && !attempted && from != address(0)) {
            attempted = true;
            (bool ok, bytes memory err) = target.call(payload);
            reentrySucceeded = ok;
            reentryError = err;
        }
    }
}
